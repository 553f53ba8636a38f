// The one way the library reads its environment. Every variable it reads
// is a row of base/env_vars.def (which the environment reference,
// docs/environment.md, is generated from); the typed readers of the GANG_*
// variables the core uses are core/env.h's, built on this.
#pragma once

namespace gang::base {

// The variable's value, or nullptr when it is unset or empty. `name` must
// be a row of env_vars.def: reading one that is not throws kInternal, so a
// variable cannot be read without being documented.
const char* env(const char* name);

}  // namespace gang::base
