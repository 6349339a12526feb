#include "io/io_backend.h"
#include "core/b.h"
int backend_read(int fd) { return b_get(fd); }
