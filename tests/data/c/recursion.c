/* Recursion: linear, tree, mutual, and tail recursion. */
int factorial(int n) {
    return n <= 1 ? 1 : n * factorial(n - 1);
}

int fibonacci(int n) {
    return n < 2 ? n : fibonacci(n - 1) + fibonacci(n - 2);
}

static int is_odd(unsigned n);

static int is_even(unsigned n) {
    return n == 0 ? 1 : is_odd(n - 1);
}

static int is_odd(unsigned n) {
    return n == 0 ? 0 : is_even(n - 1);
}

int parity(unsigned n) {
    return is_even(n);
}

int gcd(int a, int b) {
    return b == 0 ? a : gcd(b, a % b);
}
