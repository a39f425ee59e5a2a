#include "shapes.h"

namespace {
class Square final : public Shape {
  public:
    explicit Square(double side) : side_(side) {}
    double area() const override { return side_ * side_; }
    std::string name() const override { return "square"; }

  private:
    double side_;
};

class Circle final : public Shape {
  public:
    explicit Circle(double radius) : radius_(radius) {}
    double area() const override { return 3.14159265358979 * radius_ * radius_; }
    std::string name() const override { return "circle"; }

  private:
    double radius_;
};
}  // namespace

std::unique_ptr<Shape> make_shape(const std::string& kind, double size) {
    if (size < 0) throw std::invalid_argument("negative size for " + kind);
    if (kind == "square") return std::make_unique<Square>(size);
    if (kind == "circle") return std::make_unique<Circle>(size);
    throw std::invalid_argument("unknown shape " + kind);
}
