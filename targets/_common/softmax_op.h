/* FORGE_P_OP: _softmax or _log_softmax (y = (x - M) - log S); another name does not compile. */
#ifndef FORGE_P_OP
#define FORGE_P_OP _softmax
#endif
#define SM__softmax 0
#define SM__log_softmax 1
#include "../_common/op_code.h"  // FORGE_OP_CODE
#define SM_LOG FORGE_OP_CODE(SM_)
