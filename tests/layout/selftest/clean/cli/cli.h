int cli(void);
