#include "core/a.h"
#include "io/io.h"
