// Deleting store keys that nobody reads any more (a membership change's
// rounds, tickets and records, a creation's rendezvous), so a long job's
// store holds what its live gangs use rather than its whole history.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gang::store {
class Store;
}

namespace gang::core {

// Removes `keys` from `store`, and for each (counter, item) of `counted`
// the keys item1..itemN where N is the counter's value, then the counter,
// on the process's forgetting thread (one, for as long as the process
// lives): the caller does not wait, and errors are ignored
// (a key left behind costs memory, never correctness). Never throws.
void forget(std::shared_ptr<store::Store> store, std::vector<std::string> keys,
            std::vector<std::pair<std::string, std::string>> counted = {});

}  // namespace gang::core
