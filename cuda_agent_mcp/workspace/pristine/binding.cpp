// binding.cpp -- written by cuda-agent-mcp. Do not edit: the build always uses the project's copy.
// The Python module `cuda_extension` exposes every function registered with REGISTER_BINDING.
#include "binding_registry.h"

PYBIND11_MODULE(cuda_extension, m) { BindingRegistry::getInstance().applyBindings(m); }
