int tok(void);
