/* Floating point: accumulation, polynomial evaluation, Newton iteration, float/double mixing. */
double mean(const double *values, int count) {
    double total = 0.0;
    for (int i = 0; i < count; i++)
        total += values[i];
    return count ? total / count : 0.0;
}

float horner(const float *coefficients, int degree, float x) {
    float result = coefficients[degree];
    for (int i = degree - 1; i >= 0; i--)
        result = result * x + coefficients[i];
    return result;
}

double newton_sqrt(double value) {
    double guess = value > 1.0 ? value / 2.0 : 1.0;
    for (int step = 0; step < 20; step++)
        guess = 0.5 * (guess + value / guess);
    return guess;
}

float clamp(float x, float low, float high) {
    return x < low ? low : (x > high ? high : x);
}
