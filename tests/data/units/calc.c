/* A small interpreter whose translation unit exercises what per-function splitting must keep right: static
   helpers with one caller and with several, static and external mutable globals, private string constants,
   a constant table of function pointers, recursion, a switch, loops and a static function only reachable
   through a global initializer. */
#include <stdio.h>
#include <string.h>

int checksum;                       /* external, mutable */
static int calls;                   /* internal, mutable */
static const int primes[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29};

static int add(int a, int b) { calls++; return a + b; }
static int sub(int a, int b) { calls++; return a - b; }
static int mul(int a, int b) { calls++; return a * b; }
static int mod(int a, int b) { calls++; return b ? a % b : 0; }

typedef int (*op_fn)(int, int);
static const struct { char name; op_fn fn; } ops[] = {{'+', add}, {'-', sub}, {'*', mul}, {'%', mod}};

static op_fn find_op(char name) {          /* one caller: joins its module */
    for (unsigned i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (ops[i].name == name) return ops[i].fn;
    return 0;
}

static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static int mix(int x) {                    /* two callers */
    switch (x & 7) {
    case 0: return x * 3;
    case 1: return x ^ 0x55;
    case 2: return x + primes[x % 10];
    case 3: return x - 17;
    default: return x / 2 + 1;
    }
}

int eval(const char *program) {
    int stack[32], top = 0;
    for (const char *p = program; *p; p++) {
        if (*p >= '0' && *p <= '9') {
            stack[top++] = *p - '0';
        } else if (*p == 'f' && top) {
            stack[top - 1] = fib(stack[top - 1] + 5);
        } else if (*p == 'm' && top) {
            stack[top - 1] = mix(stack[top - 1]);
        } else if (top >= 2) {
            op_fn fn = find_op(*p);
            if (fn) { top--; stack[top - 1] = fn(stack[top - 1], stack[top]); }
        }
    }
    return top ? stack[top - 1] : 0;
}

unsigned hash(const char *s) {
    unsigned h = 5381;
    while (*s) h = h * 33 + (unsigned char)*s++;
    return h ^ (unsigned)mix((int)strlen(s));
}

int main(void) {
    static const char *programs[] = {"12+3*", "9f", "78m+5%", "99*9*m", "4f2f+", "123456789+++++++m"};
    for (unsigned i = 0; i < sizeof programs / sizeof programs[0]; i++) {
        int value = eval(programs[i]);
        checksum += value;
        printf("%s = %d (hash %u)\n", programs[i], value, hash(programs[i]));
    }
    printf("checksum %d, calls %d\n", checksum, calls);
    return 0;
}
