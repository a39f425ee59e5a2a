#include <cstdio>
#include <map>

#include "shapes.h"

template <typename Count>
struct Tally {
    std::map<std::string, Count> counts;
    void add(const std::string& key) { ++counts[key]; }
};

int main() {
    const char* kinds[] = {"square", "circle", "hexagon", "square", "circle"};
    const double sizes[] = {2.0, 1.0, 3.0, -1.0, 0.5};
    std::vector<std::unique_ptr<Shape>> shapes;
    Tally<int> errors;
    for (int i = 0; i < 5; ++i) {
        try {
            shapes.push_back(make_shape(kinds[i], sizes[i]));
        } catch (const std::invalid_argument& error) {
            std::printf("error: %s\n", error.what());
            errors.add(kinds[i]);
        }
    }
    double area = total<double>(shapes, [](const Shape& s) { return s.area(); });
    auto letters = total<std::size_t>(shapes, [](const Shape& s) { return s.name().size(); });
    std::printf("shapes %zu area %.4f letters %zu\n", shapes.size(), area, letters);
    for (const auto& [kind, count] : errors.counts) std::printf("%s failed %d\n", kind.c_str(), count);
    return 0;
}
