// A small C++ program for optcc++'s test: templates, virtual calls, exceptions, the standard library.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

struct Shape {
    virtual ~Shape() = default;
    virtual double area() const = 0;
    virtual std::string name() const = 0;
};

std::unique_ptr<Shape> make_shape(const std::string& kind, double size);  // throws std::invalid_argument

template <typename T, typename Key>
T total(const std::vector<std::unique_ptr<Shape>>& shapes, Key key) {
    T sum{};
    for (const auto& shape : shapes) sum += key(*shape);
    return sum;
}
