/* The op a template instance computes: FORGE_P_OP (forge writes the captured
 * op's name there, "$op") pasted onto an op table's prefix, so
 * FORGE_OP_CODE(RD_) is RD_sum when FORGE_P_OP is sum, a number the table
 * defines. An op the table lacks pastes to an undefined name, which #if reads
 * as 0: each table rejects that with #error. */
#ifndef FORGE_OP_CODE
#define FORGE_PASTE_(a, b) a##b
#define FORGE_PASTE(a, b) FORGE_PASTE_(a, b)
#define FORGE_OP_CODE(prefix) FORGE_PASTE(prefix, FORGE_P_OP)
#endif
