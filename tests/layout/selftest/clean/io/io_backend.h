int backend_read(int fd);
