/* Globals, constant tables, function pointers, static helpers, variadic calls and strings. */
#include <stdarg.h>

int printf(const char *format, ...);

static const int primes[8] = {2, 3, 5, 7, 11, 13, 17, 19};
int counter;
static int hidden_state = 42;

static int twice(int x) { return 2 * x; }
static int square(int x) { return x * x; }

int (*const operations[2])(int) = {twice, square};

int apply(int which, int x) {
    return operations[which & 1](x);
}

int nth_prime(int n) {
    return n >= 0 && n < 8 ? primes[n] : -1;
}

void bump(void) {
    counter++;
    hidden_state ^= counter;
}

int sum_varargs(int count, ...) {
    va_list args;
    va_start(args, count);
    int total = 0;
    for (int i = 0; i < count; i++)
        total += va_arg(args, int);
    va_end(args);
    return total;
}

void report(int value) {
    printf("value=%d; state=%d\n", value, hidden_state);
}
