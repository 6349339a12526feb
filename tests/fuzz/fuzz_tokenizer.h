/* The embedded model's tokenizer for the harnesses that fuzz what it encodes, decodes or renders. */
#ifndef DSSPEC_FUZZ_TOKENIZER_H
#define DSSPEC_FUZZ_TOKENIZER_H

#include "tokenizer/tokenizer.h"

/* Loads models/dsspec-tiny's tokenizer; a harness cannot run without it, so failure is fuzz_fail. */
tokenizer *fuzz_embedded_tokenizer(void);

#endif
