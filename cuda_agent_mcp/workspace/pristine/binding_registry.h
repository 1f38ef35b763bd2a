// binding_registry.h -- written by cuda-agent-mcp. Do not edit: the build always uses the project's copy.
//
// Each kernels/<name>_binding.cpp registers its Python functions here at load time:
//
//     static void register_relu(pybind11::module& m) { m.def("relu", &relu_forward, "ReLU (CUDA)"); }
//     REGISTER_BINDING(relu, register_relu)
//
// binding.cpp then applies every registration inside one PYBIND11_MODULE(cuda_extension, m).
#pragma once

#include <torch/csrc/utils/pybind.h>

#include <vector>

class __attribute__((visibility("hidden"))) BindingRegistry {
 public:
  using RegisterFunction = void (*)(pybind11::module&);

  // One registry per extension: the function-local static is shared by every translation unit.
  static BindingRegistry& getInstance() {
    static BindingRegistry registry;
    return registry;
  }

  void registerBinding(const char* name, RegisterFunction function) {
    entries_.push_back(Entry{name, function});
  }

  void applyBindings(pybind11::module& m) const {
    for (const Entry& entry : entries_) entry.function(m);
  }

 private:
  struct Entry {
    const char* name;
    RegisterFunction function;
  };
  std::vector<Entry> entries_;
};

#define REGISTER_BINDING(name, function)                                          \
  static const bool cuda_agent_binding_registered_##name =                        \
      (BindingRegistry::getInstance().registerBinding(#name, function), true);
