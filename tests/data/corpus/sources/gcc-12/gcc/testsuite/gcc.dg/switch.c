int classify(int c) {
  switch (c) {
  case 0: return 10;
  case 1: return 20;
  case 2: return 30;
  case 7: return 70;
  default: return -1;
  }
}

int gcd(int a, int b) {
  while (b) {
    int t = a % b;
    a = b;
    b = t;
  }
  return a;
}

long fib(int n) {
  long a = 0, b = 1;
  for (int i = 0; i < n; i++) {
    long t = a + b;
    a = b;
    b = t;
  }
  return a;
}
