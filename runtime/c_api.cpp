// Placeholder until its owner lands the implementation.
#include "flashgen/flashgen.h"
extern "C" const char* flashgen_version(void) { return FLASHGEN_VERSION_STRING; }
