#include "speculate/s.h"
#include "cache/c.h"
#include "tokenizer/tok.h"
#include "core/a.h"
#include "engine/e.h"
int e(void) { return s() + c() + tok(); }
