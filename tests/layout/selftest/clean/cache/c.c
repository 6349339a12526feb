#include "cache/c.h"
#include "io/io_backend_public.h"
#include "core/b.h"
int c(void)
{
    return b_get(1);
}
