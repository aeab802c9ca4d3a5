#include "structured/structural_tag_grammar.h"

#include <array>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "fmt/format.h"
#include "simdjson.h"

#include "base/status_macros.h"
#include "structured/ebnf.h"
#include "structured/json_schema_grammar.h"

namespace switchyard::structured {
namespace {

using simdjson::dom::element;

// The triggers' total size: the automaton keeps a 256-entry transition row per trigger byte.
constexpr size_t kMaxTriggerBytes = 4096;
constexpr size_t kMaxJsonDepth = 256;

struct Structure {
  std::string begin;
  std::string schema;  // minified JSON
  std::string end;
};

struct StructuralTag {
  std::vector<Structure> structures;
  std::vector<std::string> triggers;
};

absl::Status TagError(std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("structural_tag: {}", what));
}

absl::Status CheckKeys(simdjson::dom::object object, std::initializer_list<std::string_view> keys,
                       std::string_view where) {
  for (auto field : object) {
    bool known = false;
    for (std::string_view key : keys)
      known = known || field.key == key;
    if (!known) {
      return TagError(fmt::format("unknown field '{}' in {}", Printable(field.key), where));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadString(simdjson::dom::object object, std::string_view key, std::string_view where,
                        std::string* out) {
  std::string_view text;
  if (object[key].get(text) != simdjson::SUCCESS)
    return TagError(fmt::format("{}.{} must be a string", where, key));
  *out = std::string(text);
  return absl::OkStatus();
}

absl::StatusOr<StructuralTag> Parse(std::string_view json) {
  simdjson::dom::parser parser;
  if (parser.allocate(json.size() + simdjson::SIMDJSON_PADDING, kMaxJsonDepth) !=
      simdjson::SUCCESS) {
    return TagError("the specification is too large");
  }
  const simdjson::padded_string padded(json);
  simdjson::dom::object root;
  if (parser.parse(padded).get(root) != simdjson::SUCCESS)
    return TagError("the specification must be a JSON object (valid JSON, not nested too deeply)");
  if (root["structures"].error() != simdjson::SUCCESS) {
    return TagError(root["format"].error() == simdjson::SUCCESS
                        ? "only the structures/triggers form is supported, not `format`"
                        : "structures is required");
  }
  SY_RETURN_IF_ERROR(CheckKeys(root, {"type", "structures", "triggers"}, "structural_tag"));
  std::string_view type;
  if (root["type"].error() == simdjson::SUCCESS &&
      (root["type"].get(type) != simdjson::SUCCESS || type != "structural_tag")) {
    return TagError("type must be 'structural_tag'");
  }
  StructuralTag tag;
  size_t text_bytes = 0;
  simdjson::dom::array structures;
  if (root["structures"].get(structures) != simdjson::SUCCESS || structures.size() == 0 ||
      structures.size() > kMaxStructuralTags) {
    return TagError(
        fmt::format("structures must be a list of 1 to {} structures", kMaxStructuralTags));
  }
  for (element item : structures) {
    const std::string where = fmt::format("structures[{}]", tag.structures.size());
    simdjson::dom::object object;
    if (item.get(object) != simdjson::SUCCESS)
      return TagError(fmt::format("{} must be an object", where));
    SY_RETURN_IF_ERROR(CheckKeys(object, {"begin", "schema", "end"}, where));
    Structure s;
    SY_RETURN_IF_ERROR(ReadString(object, "begin", where, &s.begin));
    SY_RETURN_IF_ERROR(ReadString(object, "end", where, &s.end));
    element schema;
    if (object["schema"].get(schema) != simdjson::SUCCESS ||
        (!schema.is_object() && !schema.is_bool())) {
      return TagError(
          fmt::format("{}.schema must be a JSON schema (an object or a boolean)", where));
    }
    s.schema = simdjson::minify(schema);
    text_bytes += s.begin.size() + s.end.size() + s.schema.size();
    tag.structures.push_back(std::move(s));
  }
  simdjson::dom::array triggers;
  if (root["triggers"].get(triggers) != simdjson::SUCCESS || triggers.size() == 0 ||
      triggers.size() > kMaxStructuralTags) {
    return TagError(fmt::format("triggers must be a list of 1 to {} strings", kMaxStructuralTags));
  }
  size_t trigger_bytes = 0;
  for (element item : triggers) {
    std::string_view text;
    if (item.get(text) != simdjson::SUCCESS || text.empty())
      return TagError("each trigger must be a non-empty string");
    trigger_bytes += text.size();
    tag.triggers.emplace_back(text);
  }
  if (trigger_bytes > kMaxTriggerBytes)
    return TagError(fmt::format("the triggers are too long (at most {} bytes)", kMaxTriggerBytes));
  if (text_bytes + trigger_bytes > kMaxEbnfTextBytes)
    return TagError(
        fmt::format("the specification is too long (at most {} bytes)", kMaxEbnfTextBytes));
  for (size_t i = 0; i < tag.structures.size(); ++i) {
    bool triggered = false;
    for (const std::string& t : tag.triggers)
      triggered = triggered || tag.structures[i].begin.starts_with(t);
    if (!triggered) {
      return TagError(fmt::format("structures[{}].begin '{}' does not start with any trigger", i,
                                  Printable(tag.structures[i].begin)));
    }
  }
  return tag;
}

// Aho-Corasick automaton over the triggers: node = the longest suffix of the text so far that
// is a prefix of some trigger; `fired` lists the triggers that end at the current position.
class TriggerAutomaton {
 public:
  explicit TriggerAutomaton(const std::vector<std::string>& triggers) {
    nodes_.emplace_back();
    for (size_t t = 0; t < triggers.size(); ++t) {
      int32_t at = 0;
      for (char c : triggers[t]) {
        const auto b = static_cast<uint8_t>(c);
        int32_t child = nodes_[static_cast<size_t>(at)].child[b];
        if (child == 0) {
          child = static_cast<int32_t>(nodes_.size());
          nodes_[static_cast<size_t>(at)].child[b] = child;
          nodes_.emplace_back();
        }
        at = child;
      }
      nodes_[static_cast<size_t>(at)].fired.push_back(t);
    }
    // Breadth-first: fail links, the union of fired triggers along them, and the complete
    // transition function (child arrays become the goto rows).
    std::deque<int32_t> queue;
    for (int32_t& child : nodes_[0].child) {
      if (child != 0)
        queue.push_back(child);
    }
    while (!queue.empty()) {
      const int32_t n = queue.front();
      queue.pop_front();
      Node& node = nodes_[static_cast<size_t>(n)];
      const Node& fail = nodes_[static_cast<size_t>(node.fail)];
      node.fired.insert(node.fired.end(), fail.fired.begin(), fail.fired.end());
      for (size_t b = 0; b < 256; ++b) {
        int32_t& child = nodes_[static_cast<size_t>(n)].child[b];
        const int32_t via_fail = nodes_[static_cast<size_t>(node.fail)].child[b];
        if (child != 0) {
          nodes_[static_cast<size_t>(child)].fail = via_fail;
          queue.push_back(child);
        } else {
          child = via_fail;
        }
      }
    }
  }

  int32_t size() const { return static_cast<int32_t>(nodes_.size()); }
  int32_t Next(int32_t node, uint8_t byte) const {
    return nodes_[static_cast<size_t>(node)].child[byte];
  }
  const std::vector<size_t>& fired(int32_t node) const {
    return nodes_[static_cast<size_t>(node)].fired;
  }

 private:
  struct Node {
    std::array<int32_t, 256> child{};  // after construction: the transition on each byte
    int32_t fail = 0;
    std::vector<size_t> fired;  // indices of the triggers that end here
  };
  std::vector<Node> nodes_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<const Grammar>> CompileStructuralTag(std::string_view json) {
  SY_ASSIGN_OR_RETURN(const StructuralTag tag, Parse(json));
  GrammarBuilder b;
  const int32_t root = b.NewRule();

  std::vector<int32_t> schema_rule;
  absl::flat_hash_map<std::string, int32_t> rule_of_schema;
  for (size_t i = 0; i < tag.structures.size(); ++i) {
    const std::string& schema = tag.structures[i].schema;
    auto [it, inserted] = rule_of_schema.emplace(schema, 0);
    if (inserted) {
      absl::StatusOr<std::shared_ptr<const Grammar>> g = CompileJsonSchema(schema);
      if (!g.ok())
        return TagError(
            fmt::format("structures[{}].schema: {}", i, std::string(g.status().message())));
      it->second = b.AddGrammar(**g);
      if (b.num_states() > GrammarBuilder::kMaxStates)
        return TagError("the schemas are too large together");
    }
    schema_rule.push_back(it->second);
  }

  // One state per automaton node: free text where no trigger has fired, else the dispatch to
  // the structures that the fired triggers begin.
  const TriggerAutomaton automaton(tag.triggers);
  std::vector<int32_t> state(static_cast<size_t>(automaton.size()));
  for (int32_t n = 0; n < automaton.size(); ++n)
    state[static_cast<size_t>(n)] = n == 0 ? b.RuleStart(root) : b.NewState();
  const int32_t free_start = state[0];
  for (int32_t n = 0; n < automaton.size(); ++n) {
    const int32_t from = state[static_cast<size_t>(n)];
    if (!automaton.fired(n).empty()) {
      for (size_t t : automaton.fired(n)) {
        const std::string& trigger = tag.triggers[t];
        for (size_t i = 0; i < tag.structures.size(); ++i) {
          const Structure& s = tag.structures[i];
          if (!s.begin.starts_with(trigger))
            continue;
          const int32_t begun = b.NewState();
          b.AddLiteral(from, std::string_view(s.begin).substr(trigger.size()), begun);
          const int32_t content = b.NewState();
          b.AddCall(begun, schema_rule[i], content);
          b.AddLiteral(content, s.end, free_start);
        }
      }
      continue;
    }
    b.SetFinal(from);
    int lo = 0;
    for (int byte = 1; byte <= 256; ++byte) {
      if (byte < 256 && automaton.Next(n, static_cast<uint8_t>(byte)) ==
                            automaton.Next(n, static_cast<uint8_t>(lo))) {
        continue;
      }
      const int32_t to = state[static_cast<size_t>(automaton.Next(n, static_cast<uint8_t>(lo)))];
      b.AddBytes(from, static_cast<uint8_t>(lo), static_cast<uint8_t>(byte - 1), to);
      lo = byte;
    }
  }
  return b.Build(root);
}

}  // namespace switchyard::structured
