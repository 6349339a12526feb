int s(void);
