#include "core/text_file.h"
#include "core/a.h"
#include "io/io.h"
