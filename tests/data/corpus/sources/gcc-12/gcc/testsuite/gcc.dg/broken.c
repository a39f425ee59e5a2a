/* Does not compile: the build counts it as a compile error and goes on. */
int broken(int x) { return x + ; }
