int cache;
