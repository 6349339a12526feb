int io;
