/* Loops: counted, nested, while with early exit, and a loop over a 2-D array. */
int sum_to(int n) {
    int total = 0;
    for (int i = 0; i < n; i++)
        total += i;
    return total;
}

void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int k = 0; k < n; k++)
                acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}

int find_first(const int *values, int count, int wanted) {
    int i = 0;
    while (i < count) {
        if (values[i] == wanted)
            return i;
        i++;
    }
    return -1;
}

int grid_max(int grid[8][8]) {
    int best = grid[0][0];
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 8; c++)
            if (grid[r][c] > best)
                best = grid[r][c];
    return best;
}
