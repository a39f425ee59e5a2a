/* Old-style C that needs the -Wno-error flags: implicit int and an implicit declaration. */
static g;

void scale(double *m, int rows, int cols, double k) {
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++)
      m[i * cols + j] *= k;
}

double trace(const double *m, int n) {
  double t = 0;
  for (int i = 0; i < n; i++)
    t += m[i * n + i];
  return t;
}

int main() {
  double m[4] = {1, 2, 3, 4};
  scale(m, 2, 2, 2.0);
  if (trace(m, 2) != 10.0)
    abort();
  g = 1;
  return 0;
}
