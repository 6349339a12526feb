#include "tokenizer/tok.h"
#include "core/text_file.h"
int tok(void) { return text_file_read("x") != 0; }
