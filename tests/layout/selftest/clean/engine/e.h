int e(void);
