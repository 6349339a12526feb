int b_get(int x);
