// closest_names / did_you_mean: the "did you mean" of every face's unknown-name error.
#include <gtest/gtest.h>

#include "core/name_suggestions.h"

namespace tmorph {
namespace {

const std::vector<std::string> kNames = {"model.embed_tokens.weight", "model.layers.0.mlp.down_proj.weight",
                                         "model.layers.0.mlp.up_proj.weight", "model.layers.1.mlp.down_proj.weight",
                                         "model.norm.weight", "lm_head.weight"};

TEST(NameSuggestions, ANameWithoutItsSuffixSuggestsTheNamesThatExtendIt) {
  EXPECT_EQ(closest_names("model.layers.0.mlp.down_proj", kNames),
            (std::vector<std::string>{"model.layers.0.mlp.down_proj.weight"}));
}

TEST(NameSuggestions, ATypoSuggestsTheNearestNamesFirst) {
  EXPECT_EQ(closest_names("model.norm.wieght", kNames), (std::vector<std::string>{"model.norm.weight"}));
  EXPECT_EQ(closest_names("lm_head.weights", kNames), (std::vector<std::string>{"lm_head.weight"}));
}

TEST(NameSuggestions, NothingCloseGivesNoSuggestion) {
  EXPECT_TRUE(closest_names("transformer.h.0.attn.c_attn.weight", kNames).empty());
  EXPECT_TRUE(closest_names("", kNames).empty());
  EXPECT_EQ(did_you_mean("zzz", kNames), "");
  EXPECT_TRUE(closest_names("x", {}).empty());
}

TEST(NameSuggestions, TheMessageListsAtMostThreeNames) {
  const std::vector<std::string> many = {"a.1", "a.2", "a.3", "a.4"};
  EXPECT_EQ(did_you_mean("a", many), "; did you mean 'a.1', 'a.2' or 'a.3'?");
  EXPECT_EQ(did_you_mean("model.norm.weigh", kNames), "; did you mean 'model.norm.weight'?");
}

TEST(NameSuggestions, AnExactNameIsNotSuggestedToItself) {
  EXPECT_TRUE(closest_names("lm_head.weight", {"lm_head.weight"}).empty());
}

}  // namespace
}  // namespace tmorph
