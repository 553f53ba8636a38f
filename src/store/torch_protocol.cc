#include "store/torch_protocol.h"

namespace gang::store::torch_wire {

namespace {

constexpr uint32_t kValidationMagic = 0x3C85F7CE;
constexpr uint8_t kValidate = 0;

// The probe's CHECK names this many keys: its count's low byte (0x80) ends
// the 8 bytes a legacy server takes for a length.
constexpr uint64_t kProbeKeys = 128;

bool counted(Query q) { return q == Query::kCheck || q == Query::kWait; }

}  // namespace

const char* generation_name(Generation g) {
  return g == Generation::kCurrent
             ? "PyTorch 2.2 and later (validation handshake)"
             : "PyTorch 1.x to 2.1";
}

uint8_t query_type(Generation g, Query q) {
  const bool current = g == Generation::kCurrent;
  switch (q) {
    case Query::kSet:
      return current ? 1 : 0;
    case Query::kGet:
      return current ? 3 : 2;
    case Query::kAdd:
      return current ? 4 : 3;
    case Query::kCheck:
      return current ? 5 : 4;
    case Query::kWait:
      return current ? 6 : 5;
    case Query::kGetNumKeys:
      return current ? 7 : 6;
    case Query::kDeleteKey:
      return current ? 8 : legacy_delete_key(true);
    case Query::kCancelWait:
      return current ? 12 : 11;  // legacy: 2.1 only
  }
  return 0xff;  // not reached
}

void put_u64(Bytes* out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_string(Bytes* out, const std::string& s) {
  put_u64(out, s.size());
  out->insert(out->end(), s.begin(), s.end());
}

uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

Bytes request(Generation g, Query q, const std::string& wire_key) {
  Bytes out{query_type(g, q)};
  if (counted(q)) put_u64(&out, 1);
  put_string(&out, wire_key);
  return out;
}

Bytes request(Generation g, Query q) { return Bytes{query_type(g, q)}; }

Bytes validate() {
  Bytes out{kValidate};
  for (int i = 0; i < 4; ++i) {
    out.push_back(static_cast<uint8_t>(kValidationMagic >> (8 * i)));
  }
  return out;
}

Bytes current_probe(const std::string& wire_key) {
  constexpr Generation g = Generation::kCurrent;
  Bytes out = validate();
  out.push_back(query_type(g, Query::kGetNumKeys));
  out.push_back(query_type(g, Query::kGetNumKeys));
  out.push_back(query_type(g, Query::kCheck));
  put_u64(&out, kProbeKeys);
  for (uint64_t i = 0; i < kProbeKeys; ++i) put_string(&out, wire_key);
  return out;
}

Bytes legacy_probe(const std::string& wire_key) {
  return request(Generation::kLegacy, Query::kCheck, wire_key);
}

Bytes legacy_dialect_probe(const std::string& wire_key) {
  Bytes out{9};
  put_u64(&out, 0);
  const Bytes check = legacy_probe(wire_key);
  out.insert(out.end(), check.begin(), check.end());
  return out;
}

}  // namespace gang::store::torch_wire
