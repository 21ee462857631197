// A chain's pointwise tail where a template stores its result: the chain's ops
// after the template's own (a norm followed by an activation), applied in fp32
// before the store. forge generates chain_epilogue<V>(V t0) and defines
// FORGE_CHAIN_HEAD in the text that replaces a template's FORGE_CHAIN line
// (rules/search/chain_strategies.cpp); without it FORGE_EPILOGUE is the identity.
#ifndef FORGE_EPILOGUE
#ifdef FORGE_CHAIN_HEAD
#define FORGE_EPILOGUE(v) chain_epilogue(v)
#else
#define FORGE_EPILOGUE(v) (v)
#endif
#endif
