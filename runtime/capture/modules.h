// The nn.Module each op runs under: forge's autoload (runtime/autoload)
// installs global forward hooks that call forge_capture::enter_module(name)
// and exit_module() around every module's forward while capturing; the
// recorder counts each backend call under the path of class names open on its
// thread ("__main__.Block/__main__.RMSNorm"). Torch-free.
#pragma once

#include <string>

namespace forge::capture {

void enter_module(const std::string& qualified_class);
void exit_module();
// The open modules on this thread, outermost first, joined by '/'; "" outside any.
const std::string& module_path();

}  // namespace forge::capture
