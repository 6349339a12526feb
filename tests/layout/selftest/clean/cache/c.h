#define C_MACRO(x) { x }
int c(void);
