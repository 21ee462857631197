/* FORGE_P_OP: _softmax or _log_softmax (y = (x - M) - log S); another name does not compile. */
#ifndef FORGE_P_OP
#define FORGE_P_OP _softmax
#endif
#define SM__softmax 0
#define SM__log_softmax 1
#define SM_CODE_(name) SM_##name
#define SM_CODE(name) SM_CODE_(name)
#define SM_LOG SM_CODE(FORGE_P_OP)
