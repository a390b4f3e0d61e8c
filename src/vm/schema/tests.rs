use super::*;
use crate::compile::schema::compile_schema;
use proptest::prelude::*;
use serde_json::json;

fn program(schema: Value) -> SchemaProgram {
    compile_schema(&schema).unwrap()
}

fn valid(schema: Value, instance: Value) -> bool {
    let program = program(schema);
    let answer = is_valid(&program, &instance);
    assert_eq!(
        first_violation(&program, &instance).is_none(),
        answer,
        "is_valid and first_violation disagree"
    );
    answer
}

fn violation(schema: Value, instance: Value) -> SchemaViolation {
    let program = program(schema);
    assert!(!is_valid(&program, &instance));
    first_violation(&program, &instance).unwrap()
}

fn key(k: &str) -> Segment {
    Segment::Key(k.to_owned())
}

#[test]
fn spec_example_reports_forbidden_property_at_its_path() {
    let schema = json!({
        "type": "object",
        "required": ["organizer", "attendees", "start", "end"],
        "properties": {
            "attendees": {"type": "array", "maxItems": 50},
            "recurrence": false
        }
    });
    let ok = json!({"organizer": {}, "attendees": [], "start": 1, "end": 2});
    assert!(valid(schema.clone(), ok));
    let v = violation(
        schema.clone(),
        json!({"organizer": {}, "attendees": [], "start": 1, "end": 2, "recurrence": "daily"}),
    );
    assert_eq!(v.instance_path, vec![key("recurrence")]);
    assert_eq!(v.keyword, "properties");
    assert_eq!(v.message, "`recurrence` is not allowed");
    let v = violation(
        schema.clone(),
        json!({"organizer": {}, "attendees": vec![1; 51], "start": 1, "end": 2}),
    );
    assert_eq!(v.instance_path, vec![key("attendees")]);
    assert_eq!(v.keyword, "maxItems");
    assert_eq!(v.message, "expected at most 50 items, found 51");
    let v = violation(
        schema,
        json!({"organizer": {}, "attendees": [], "start": 1}),
    );
    assert_eq!(v.keyword, "required");
    assert_eq!(v.message, "missing required property `end`");
}

#[test]
fn pattern_is_an_unanchored_search_with_quoted_value_in_message() {
    assert!(valid(json!({"pattern": "b+"}), json!("abbc")));
    let v = violation(json!({"pattern": "^a$"}), json!("abc"));
    assert_eq!(v.message, "value `\"abc\"` does not match pattern `^a$`");
    assert!(
        valid(json!({"pattern": "^a$"}), json!(12)),
        "non-strings pass"
    );
}

#[test]
fn pattern_digit_class_is_ascii_like_ecma() {
    assert!(valid(json!({"pattern": "^\\d+$"}), json!("0123")));
    assert!(!valid(json!({"pattern": "^\\d+$"}), json!("১২")));
    assert!(!valid(json!({"pattern": "^\\w+$"}), json!("é")));
    assert!(valid(json!({"pattern": "^\\p{Letter}+$"}), json!("é")));
}

/// `\d`, `\w` and `\s` are ASCII in `pattern` and `patternProperties` as in `fieldMatches`:
/// `\s` too, where ECMA-262 reads Unicode spaces; their negations take the Unicode characters
/// in, and `\p{..}` classes stay Unicode.
#[test]
fn perl_classes_are_ascii_in_payload_schema_patterns() {
    for unicode in ["١٢٣", "１２３", "৩"] {
        assert!(
            !valid(json!({"pattern": "^\\d+$"}), json!(unicode)),
            "{unicode}"
        );
        assert!(
            !valid(json!({"pattern": "^[\\d]+$"}), json!(unicode)),
            "{unicode}"
        );
        assert!(
            valid(json!({"pattern": "^\\D+$"}), json!(unicode)),
            "{unicode}"
        );
        assert!(
            valid(json!({"pattern": "^\\p{Nd}+$"}), json!(unicode)),
            "{unicode}"
        );
    }
    assert!(!valid(json!({"pattern": "^\\w+$"}), json!("ｆｏｏ")));
    assert!(valid(json!({"pattern": "^\\w+$"}), json!("foo_9")));
    for space in ["\u{a0}", "\u{3000}", "\u{2028}", "\u{feff}"] {
        assert!(!valid(
            json!({"pattern": "^a\\sb$"}),
            json!(format!("a{space}b"))
        ));
        assert!(valid(
            json!({"pattern": "^a\\Sb$"}),
            json!(format!("a{space}b"))
        ));
        assert!(valid(
            json!({"pattern": "^a[^\\s]b$"}),
            json!(format!("a{space}b"))
        ));
    }
    assert!(valid(json!({"pattern": "^a\\sb$"}), json!("a\tb")));
    let names = json!({
        "patternProperties": {"^\\d+$": {"type": "integer"}},
        "additionalProperties": false
    });
    assert!(valid(names.clone(), json!({"12": 1})));
    assert!(!valid(names, json!({"١٢": 1})));
}

#[test]
fn long_values_are_truncated_in_messages() {
    let long = "x".repeat(200);
    let v = violation(json!({"pattern": "^a"}), json!(long));
    assert!(v.message.contains('…'));
    assert!(v.message.chars().count() < 120, "{}", v.message);
}

#[test]
fn type_integer_accepts_integral_floats_only() {
    assert!(valid(json!({"type": "integer"}), json!(1.0)));
    assert!(valid(json!({"type": "integer"}), json!(u64::MAX)));
    assert!(!valid(json!({"type": "integer"}), json!(1.5)));
    assert!(valid(json!({"type": ["string", "null"]}), json!(null)));
    let v = violation(json!({"type": ["string", "null"]}), json!(3));
    assert_eq!(v.message, "expected null or string, found number");
}

#[test]
fn numbers_compare_exactly_beyond_2_pow_53() {
    let big: Value = serde_json::from_str("9007199254740993").unwrap();
    assert!(!valid(
        json!({"maximum": 9007199254740992_u64}),
        big.clone()
    ));
    assert!(valid(json!({"minimum": 9007199254740993_u64}), big.clone()));
    assert!(!valid(
        json!({"exclusiveMinimum": 9007199254740993_u64}),
        big
    ));
    assert!(valid(json!({"exclusiveMaximum": 3.0}), json!(2.9999)));
    assert!(!valid(json!({"exclusiveMaximum": 3}), json!(3.0)));
    let v = violation(json!({"minimum": 2}), json!(1));
    assert_eq!(v.message, "expected a number at least 2, found 1");
}

#[test]
fn multiple_of_handles_decimals_and_huge_values() {
    assert!(valid(json!({"multipleOf": 0.0001}), json!(0.0075)));
    assert!(!valid(json!({"multipleOf": 0.0001}), json!(0.00751)));
    assert!(valid(json!({"multipleOf": 0.01}), json!(19.99)));
    assert!(!valid(json!({"multipleOf": 0.123456789}), json!(1e308)));
    assert!(valid(json!({"multipleOf": 1e-8}), json!(12391239123_u64)));
    assert!(valid(json!({"multipleOf": 3}), json!(u64::MAX)));
    assert!(valid(json!({"multipleOf": 7}), json!(i64::MIN + 1)));
}

#[test]
fn string_lengths_count_code_points() {
    assert!(valid(json!({"maxLength": 2}), json!("éé")));
    assert!(!valid(json!({"maxLength": 1}), json!("éé")));
    assert!(valid(json!({"minLength": 2}), json!("💩💩")));
    let v = violation(json!({"minLength": 1}), json!(""));
    assert_eq!(v.message, "expected at least 1 character, found 0");
}

#[test]
fn enum_and_const_use_json_equality() {
    assert!(valid(json!({"enum": [1, "a"]}), json!(1.0)));
    assert!(!valid(json!({"enum": [1]}), json!(true)));
    assert!(valid(json!({"const": {"a": [1]}}), json!({"a": [1.0]})));
    let v = violation(json!({"const": "x"}), json!("y"));
    assert_eq!(v.keyword, "const");
    assert_eq!(v.message, "expected `\"x\"`, found `\"y\"`");
    let v = violation(json!({"enum": ["a", "b"]}), json!("c"));
    assert_eq!(v.message, "value `\"c\"` is not one of [\"a\",\"b\"]");
}

#[test]
fn unique_items_uses_json_equality() {
    assert!(!valid(json!({"uniqueItems": true}), json!([1, 1.0])));
    assert!(valid(json!({"uniqueItems": true}), json!([1, true, "1"])));
    let v = violation(json!({"uniqueItems": true}), json!([{"a": 1}, 2, {"a": 1}]));
    assert_eq!(v.message, "items 0 and 2 are equal, expected unique items");
}

#[test]
fn prefix_items_then_items_apply_by_position() {
    let schema = json!({"prefixItems": [{"type": "string"}], "items": {"type": "integer"}});
    assert!(valid(schema.clone(), json!(["a", 1, 2])));
    let v = violation(schema.clone(), json!(["a", 1, "b"]));
    assert_eq!(v.instance_path, vec![Segment::Index(2)]);
    assert_eq!(v.keyword, "type");
    let v = violation(
        json!({"prefixItems": [true], "items": false}),
        json!([1, 2]),
    );
    assert_eq!(v.keyword, "items");
    assert_eq!(v.message, "item 1 is not allowed");
}

#[test]
fn contains_counts_against_min_and_max() {
    let schema = json!({"contains": {"const": 1}, "minContains": 2, "maxContains": 3});
    assert!(valid(schema.clone(), json!([1, 1, 2])));
    assert!(!valid(schema.clone(), json!([1, 2])));
    assert!(!valid(schema.clone(), json!([1, 1, 1, 1])));
    assert!(valid(
        json!({"contains": {"const": 1}, "minContains": 0}),
        json!([])
    ));
    assert!(!valid(json!({"contains": true}), json!([])));
    assert!(
        valid(json!({"minContains": 5}), json!([])),
        "ignored without contains"
    );
    let v = violation(json!({"contains": {"const": 1}}), json!([2]));
    assert_eq!(v.keyword, "minContains");
    assert_eq!(
        v.message,
        "expected at least 1 item matching `contains`, found 0"
    );
}

#[test]
fn additional_properties_sees_properties_and_pattern_properties() {
    let schema = json!({
        "properties": {"a": true},
        "patternProperties": {"^x-": {"type": "string"}},
        "additionalProperties": false
    });
    assert!(valid(schema.clone(), json!({"a": 1, "x-b": "s"})));
    let v = violation(schema.clone(), json!({"a": 1, "x-b": 2}));
    assert_eq!(v.keyword, "type");
    assert_eq!(v.instance_path, vec![key("x-b")]);
    let v = violation(schema, json!({"b": 1}));
    assert_eq!(v.keyword, "additionalProperties");
    assert_eq!(v.message, "`b` is not allowed");
}

#[test]
fn property_names_validate_member_names_as_strings() {
    let schema = json!({"propertyNames": {"pattern": "^[a-z]+$", "maxLength": 3}});
    assert!(valid(schema.clone(), json!({"abc": 1})));
    let v = violation(schema, json!({"abcd": 1}));
    assert_eq!(v.keyword, "propertyNames");
    assert_eq!(
        v.message,
        "property name `abcd` is not allowed by `propertyNames`"
    );
    assert!(valid(
        json!({"propertyNames": {"type": "string"}}),
        json!({"a": 1})
    ));
    assert!(!valid(
        json!({"propertyNames": {"enum": ["a"]}}),
        json!({"b": 1})
    ));
}

#[test]
fn min_max_properties_and_dependent_required() {
    assert!(!valid(json!({"minProperties": 1}), json!({})));
    assert!(!valid(json!({"maxProperties": 1}), json!({"a": 1, "b": 2})));
    let schema = json!({"dependentRequired": {"card": ["billing"]}});
    assert!(valid(schema.clone(), json!({"billing": 1})));
    let v = violation(schema, json!({"card": 1}));
    assert_eq!(
        v.message,
        "missing property `billing`, required when `card` is present"
    );
}

#[test]
fn combinators_follow_2020_12() {
    assert!(!valid(
        json!({"allOf": [{"minimum": 1}, {"maximum": 0}]}),
        json!(1)
    ));
    assert!(valid(
        json!({"anyOf": [{"type": "string"}, {"minimum": 1}]}),
        json!(2)
    ));
    let v = violation(json!({"anyOf": [{"type": "string"}]}), json!(2));
    assert_eq!(v.keyword, "anyOf");
    let v = violation(json!({"oneOf": [true, true]}), json!(2));
    assert_eq!(
        v.message,
        "value matches schemas 0 and 1 in `oneOf`, expected exactly one"
    );
    let v = violation(json!({"not": {"type": "integer"}}), json!(2));
    assert_eq!(v.keyword, "not");
    let schema = json!({"if": {"minimum": 10}, "then": {"multipleOf": 10}, "else": {"maximum": 5}});
    assert!(valid(schema.clone(), json!(20)));
    assert!(!valid(schema.clone(), json!(15)));
    assert!(valid(schema.clone(), json!(4)));
    assert_eq!(violation(schema, json!(7)).keyword, "maximum");
}

#[test]
fn ref_applies_alongside_siblings() {
    let schema = json!({
        "$defs": {"short": {"maxLength": 3}},
        "properties": {"a": {"$ref": "#/$defs/short", "minLength": 2}}
    });
    assert!(valid(schema.clone(), json!({"a": "ab"})));
    assert!(!valid(schema.clone(), json!({"a": "a"})));
    assert!(!valid(schema, json!({"a": "abcd"})));
}

#[test]
fn formats_are_assertions_on_strings_only() {
    assert!(valid(
        json!({"format": "date-time"}),
        json!("2026-12-01T15:00:00Z")
    ));
    let v = violation(json!({"format": "date-time"}), json!("2026-12-01 15:00"));
    assert_eq!(v.keyword, "format");
    assert_eq!(
        v.message,
        "value `\"2026-12-01 15:00\"` is not a valid date-time"
    );
    assert!(valid(json!({"format": "email"}), json!(3)));
}

#[test]
fn false_schema_at_the_root_rejects_everything() {
    let v = violation(json!(false), json!({}));
    assert_eq!(v.keyword, "false");
    assert!(v.instance_path.is_empty());
    assert!(valid(json!(true), json!({})));
}

fn nested_object(depth: usize) -> Value {
    // Built by moving, not with `json!`, which would re-serialize the whole value each level.
    let mut value = Value::Object(serde_json::Map::new());
    for _ in 0..depth {
        let mut map = serde_json::Map::new();
        map.insert("next".to_owned(), value);
        value = Value::Object(map);
    }
    value
}

fn run_on_small_stack<F: FnOnce() + Send + 'static>(f: F) {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn recursive_ref_validates_a_128_deep_payload_without_overflow() {
    run_on_small_stack(|| {
        let tree = program(json!({
            "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
            "$ref": "#/$defs/node"
        }));
        let deep = nested_object(128);
        assert!(is_valid(&tree, &deep));
        assert!(first_violation(&tree, &deep).is_none());
        // Four subschemas per payload level: $ref holder, node, allOf member, property.
        let heavier = program(json!({
            "$defs": {"node": {"allOf": [{"properties": {"next": {"$ref": "#/$defs/node"}}}]}},
            "$ref": "#/$defs/node"
        }));
        assert!(is_valid(&heavier, &deep));
        assert!(first_violation(&heavier, &deep).is_none());
    });
}

#[test]
fn validation_deeper_than_the_depth_limit_fails_closed() {
    run_on_small_stack(|| {
        let program = program(json!({"properties": {"next": {"$ref": "#"}}}));
        let deep = nested_object(1000);
        assert!(!is_valid(&program, &deep));
        let v = first_violation(&program, &deep).unwrap();
        assert_eq!(v.keyword, "limits");
        assert!(v.message.contains("deeper than"), "{}", v.message);
    });
}

#[test]
fn step_limit_fails_closed_even_inside_not() {
    // Without the abort propagating, `not` would turn "out of steps" into a pass.
    let program = program(json!({"not": {"items": {"type": "string"}}})).with_limits(1024, 50);
    let many = Value::Array(vec![json!("s"); 1000]);
    assert!(!is_valid(&program, &many));
    let v = first_violation(&program, &many).unwrap();
    assert_eq!(v.keyword, "limits");
    let few = Value::Array(vec![json!(1); 3]);
    assert!(is_valid(&program, &few));
}

/// Regression: `uniqueItems` compared every pair, one step a pair, so ~2,900 distinct scalars
/// ran out of the 4.2 M-step budget and a legitimate payload was denied. Items are hashed and
/// sorted, O(n log n): 100,000 distinct scalars — the most a `[*]` may scan — fit with room to
/// spare, and a duplicate anywhere is still found.
#[test]
fn unique_items_over_thousands_of_scalars_fits_the_budget() {
    let program = program(json!({"uniqueItems": true}));
    for n in [2_900, 5_000, 100_000] {
        let numbers = Value::Array((0..n).map(|i| json!(i)).collect());
        assert!(valid_on_both(&program, &numbers), "{n} numbers");
        let strings = Value::Array((0..n).map(|i| json!(format!("tag-{i}"))).collect());
        assert!(valid_on_both(&program, &strings), "{n} strings");
        // The last item repeats the first, written another way.
        let mut repeated: Vec<Value> = (0..n).map(|i| json!(i)).collect();
        repeated.push(json!(0.0));
        let v = violation(json!({"uniqueItems": true}), Value::Array(repeated));
        assert_eq!(
            v.message,
            format!("items 0 and {n} are equal, expected unique items")
        );
    }
    // The budget still bounds the work: with 5,000 steps, 5,000 items do not fit.
    let small = program_of(json!({"uniqueItems": true}), 5_000);
    let items = Value::Array((0..5_000).map(|i| json!(i)).collect());
    assert!(!valid_on_both(&small, &items));
    assert_eq!(first_violation(&small, &items).unwrap().keyword, "limits");
}

/// The first pair of equal items as the pairwise definition finds it: the smallest `i` with an
/// equal item after it, and the first such `j`.
fn first_equal_pair(items: &[Value]) -> Option<(usize, usize)> {
    (0..items.len()).find_map(|i| {
        ((i + 1)..items.len())
            .find(|&j| crate::value::json_eq(&items[i], &items[j]))
            .map(|j| (i, j))
    })
}

/// Values that are often equal under JSON equality but not as text: `1`, `1.0`, `-0.0`, `0`,
/// large integers and their float neighbours, short strings, and arrays and objects of them in
/// any member order.
fn arb_unique_item() -> impl Strategy<Value = Value> {
    let scalar = prop_oneof![
        Just(json!(null)),
        any::<bool>().prop_map(Value::from),
        (0i64..4).prop_map(Value::from),
        (0i64..4).prop_map(|i| json!(i as f64)),
        Just(json!(-0.0)),
        Just(json!(0.5)),
        Just(json!(u64::MAX)),
        Just(json!(18446744073709551616.0)),
        Just(json!(9007199254740993_i64)),
        Just(json!(9007199254740992.0)),
        prop::sample::select(vec!["", "a", "b", "é", "1"]).prop_map(Value::from),
    ];
    scalar.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(vec!["a", "b", "c"]), inner), 0..3)
                .prop_map(|members| Value::Object(
                    members
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect()
                )),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// The hashing `uniqueItems` answers as comparing every pair does, with the same pair in
    /// its message, pre-parsed and from bytes, below and above the pairwise size.
    #[test]
    fn unique_items_answers_as_comparing_every_pair(
        items in prop::collection::vec(arb_unique_item(), 0..40),
    ) {
        let program = program(json!({"uniqueItems": true}));
        let instance = Value::Array(items.clone());
        let expected = first_equal_pair(&items);
        prop_assert_eq!(valid_on_both(&program, &instance), expected.is_none());
        let violation = first_violation(&program, &instance);
        match expected {
            None => prop_assert!(violation.is_none()),
            Some((i, j)) => prop_assert_eq!(
                violation.map(|v| v.message),
                Some(format!("items {i} and {j} are equal, expected unique items"))
            ),
        }
    }
}

#[test]
fn nested_any_of_does_not_blow_up() {
    // Each level offers two branches that both lead to the next level through `$ref`s:
    // naive evaluation of a failing instance is 2^40 node visits; the step limit bounds it.
    let mut defs = serde_json::Map::new();
    for i in 0..40 {
        defs.insert(
            format!("l{i}"),
            json!({"anyOf": [{"$ref": format!("#/$defs/l{}", i + 1)}, {"$ref": format!("#/$defs/l{}", i + 1)}]}),
        );
    }
    defs.insert("l40".to_owned(), json!({"type": "string"}));
    let program = program(json!({"$defs": defs, "$ref": "#/$defs/l0"}));
    let started = std::time::Instant::now();
    assert!(!is_valid(&program, &json!(1)));
    assert!(
        is_valid(&program, &json!("s")),
        "valid instances short-circuit"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-5i64..20).prop_map(|n| json!(n)),
        (-5.0f64..20.0).prop_map(|f| json!((f * 4.0).round() / 4.0)),
        "[a-c]{0,4}".prop_map(Value::String),
        prop_oneof![
            Just("2026-01-01"),
            Just("2026-13-01"),
            Just("a@b.co"),
            Just("10.0.0.1")
        ]
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-d]{1,2}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn property_schemas() -> Vec<SchemaProgram> {
    [
        json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "integer", "minimum": 0}, "b": false}, "additionalProperties": {"type": "string"}}),
        json!({"items": {"anyOf": [{"type": "string", "maxLength": 2}, {"multipleOf": 0.5}]}, "uniqueItems": true, "contains": {"const": 1}, "maxContains": 1}),
        json!({"oneOf": [{"type": "array"}, {"type": "object", "propertyNames": {"pattern": "^a"}}], "not": {"const": []}}),
        json!({"$defs": {"t": {"anyOf": [{"type": ["null", "boolean", "number"]}, {"type": "array", "items": {"$ref": "#/$defs/t"}}, {"type": "object", "additionalProperties": {"$ref": "#/$defs/t"}}]}}, "$ref": "#/$defs/t"}),
        json!({"if": {"type": "string"}, "then": {"format": "date"}, "else": {"dependentRequired": {"a": ["b"]}, "prefixItems": [{"type": "null"}]}}),
        json!({"anyOf": [{"format": "email"}, {"format": "ipv4"}, {"type": "object", "minProperties": 2}]}),
    ]
    .into_iter()
    .map(program)
    .collect()
}

proptest! {
    #[test]
    fn first_violation_is_some_exactly_when_invalid(instance in arb_json()) {
        for program in property_schemas() {
            let valid = is_valid(&program, &instance);
            let violation = first_violation(&program, &instance);
            prop_assert_eq!(violation.is_none(), valid, "{:?}", violation);
            if let Some(v) = violation {
                prop_assert!(!v.message.is_empty());
                prop_assert!(!v.message.contains('\n'));
            }
        }
    }
}

#[test]
fn a_lone_keyword_of_every_group_is_enforced_when_the_shape_skips_the_others() {
    // Each schema has keywords of one group only, so validation skips every other group:
    // the keyword itself must still apply.
    assert!(!valid(json!({"minLength": 2}), json!("a")));
    assert!(!valid(json!({"format": "date"}), json!("not a date")));
    assert!(!valid(json!({"multipleOf": 2}), json!(3)));
    assert!(!valid(json!({"uniqueItems": true}), json!([1, 1])));
    assert!(!valid(
        json!({"dependentRequired": {"a": ["b"]}}),
        json!({"a": 1})
    ));
    assert!(!valid(json!({"if": true, "then": false}), json!(1)));
    assert!(!valid(json!({"const": 1}), json!(2)));
}

#[test]
fn required_names_listed_in_properties_are_looked_up_once_and_still_checked() {
    let schema = json!({
        "required": ["a", "z"],
        "properties": {"a": {"type": "string"}, "b": false, "c": {"type": "number"}}
    });
    assert!(valid(schema.clone(), json!({"a": "x", "z": 1})));
    assert_eq!(
        violation(schema.clone(), json!({"z": 1})).keyword,
        "required"
    );
    // Present, so `required` holds, but its property schema is `false`.
    assert_eq!(
        violation(schema.clone(), json!({"a": "x", "b": 1, "z": 1})).keyword,
        "properties"
    );
    assert_eq!(violation(schema, json!({"a": 1, "z": 1})).keyword, "type");
}

proptest! {
    /// `minLength`/`maxLength` count characters; the byte-length shortcut must never decide
    /// differently from counting (1- to 4-byte characters, bounds around the count).
    #[test]
    fn string_length_bounds_agree_with_the_character_count(
        chars in prop::collection::vec(prop::sample::select(vec!['a', 'é', '€', '💩']), 0..12),
        min in prop::option::of(0u64..14),
        max in prop::option::of(0u64..14),
    ) {
        let text: String = chars.iter().collect();
        let count = chars.len() as u64;
        let mut schema = serde_json::Map::new();
        if let Some(min) = min {
            schema.insert("minLength".to_owned(), json!(min));
        }
        if let Some(max) = max {
            schema.insert("maxLength".to_owned(), json!(max));
        }
        let expected = min.is_none_or(|m| count >= m) && max.is_none_or(|m| count <= m);
        prop_assert_eq!(valid(Value::Object(schema), json!(text)), expected, "{:?}", text);
    }
}

/// A schema of `type` and size bounds only (a [`Leaf`] the quiet evaluator checks in line).
fn arb_leaf_schema() -> impl Strategy<Value = Value> {
    let types = prop::option::of(prop::sample::select(vec![
        json!("string"),
        json!("array"),
        json!("integer"),
        json!("number"),
        json!("null"),
        json!(["string", "array"]),
        json!(["integer", "object"]),
    ]));
    let bound = || prop::option::of(0u64..5);
    (types, bound(), bound(), bound(), bound()).prop_map(
        |(types, min_len, max_len, min_items, max_items)| {
            let mut schema = serde_json::Map::new();
            let entries = [
                ("type", types),
                ("minLength", min_len.map(|n| json!(n))),
                ("maxLength", max_len.map(|n| json!(n))),
                ("minItems", min_items.map(|n| json!(n))),
                ("maxItems", max_items.map(|n| json!(n))),
            ];
            for (keyword, value) in entries {
                if let Some(value) = value {
                    schema.insert(keyword.to_owned(), value);
                }
            }
            Value::Object(schema)
        },
    )
}

proptest! {
    /// Leaf subschemas (under `properties`, `items` and `additionalProperties`) checked in line
    /// by `is_valid` decide exactly as the general evaluator behind `first_violation` does.
    #[test]
    fn leaf_schemas_checked_in_line_agree_with_the_general_evaluator(
        leaf in arb_leaf_schema(),
        other in arb_leaf_schema(),
        instance in arb_json(),
        text in prop::collection::vec(prop::sample::select(vec!['a', 'é', '€', '💩']), 0..6),
    ) {
        let text: String = text.into_iter().collect();
        let schemas = [
            json!({"properties": {"a": leaf.clone(), "b": other.clone()}, "additionalProperties": leaf.clone()}),
            json!({"items": leaf.clone()}),
            json!({"prefixItems": [other.clone()], "items": leaf.clone()}),
        ];
        let instances = [
            instance.clone(),
            json!({"a": instance.clone(), "b": text.clone(), "c": [text.clone()]}),
            json!([text.clone(), instance.clone(), [1, 2, 3]]),
        ];
        for schema in &schemas {
            let program = program(schema.clone());
            prop_assert!(
                program.node(program.root()).is_some(),
                "the schema compiles to a root node"
            );
            for instance in &instances {
                let quick = is_valid(&program, instance);
                let violation = first_violation(&program, instance);
                prop_assert_eq!(quick, violation.is_none(), "{} on {}: {:?}", schema, instance, violation);
            }
        }
    }
}

#[test]
fn leaf_shapes_are_recognised_only_for_type_and_size_bounds() {
    use crate::bytecode::schema::SchemaNode;
    let leaf = |schema: Value| {
        let program = program(json!({"items": schema}));
        let Some(SchemaNode::Object(root)) = program.node(program.root()) else {
            panic!("an object root");
        };
        let items = root.items.expect("items");
        match program.node(items) {
            Some(SchemaNode::Object(object)) => object.shape.leaf.is_some(),
            _ => false,
        }
    };
    assert!(leaf(json!({"type": "string", "maxLength": 3})));
    assert!(leaf(json!({"type": "array", "minItems": 1, "maxItems": 3})));
    assert!(leaf(json!({"type": ["integer", "null"]})));
    assert!(!leaf(json!({"type": "string", "pattern": "a"})));
    assert!(!leaf(json!({"type": "integer", "minimum": 0})));
    assert!(!leaf(
        json!({"maxItems": 3, "items": true, "uniqueItems": true})
    ));
    assert!(!leaf(json!({"type": "object", "required": ["a"]})));
    assert!(!leaf(json!({"maxLength": 3, "not": {"const": "a"}})));
    assert!(!leaf(json!({"enum": ["a"]})));
}

/// `is_valid` and `first_violation` of `program` on `text`, read as a `Value` and as a tape.
fn on_both(program: &SchemaProgram, text: &str) -> [(bool, Option<SchemaViolation>); 2] {
    let value: Value = serde_json::from_str(text).unwrap();
    let mut tape = crate::tape::Tape::new();
    let doc = tape.parse(text.as_bytes(), 1000).unwrap();
    let root = doc.root();
    let answers = [
        (is_valid(program, &value), first_violation(program, &value)),
        (is_valid(program, root), first_violation(program, root)),
    ];
    for (valid, violation) in &answers {
        assert_eq!(violation.is_none(), *valid, "{text}: {violation:?}");
    }
    answers
}

/// Found in review: the quiet evaluator stopped at the first failing member, in the document's
/// order — the input's on a tape, name order in a `Value` — so the steps an `anyOf` branch
/// spent, and whether the budget lasted for the next branch, depended on that order. Here the
/// member `u` fails the first branch: a tape reading it first had steps left for the second
/// branch's `uniqueItems` where the `Value`, reaching `u` last, ran out (a request from bytes
/// was allowed, the same request pre-parsed denied).
#[test]
fn regression_the_step_budget_does_not_depend_on_the_order_of_members() {
    let schema = json!({"anyOf": [
        {"additionalProperties": {"type": "integer"}},
        {"properties": {"u": {"uniqueItems": true}}}
    ]});
    let list: Vec<String> = (0..10).map(|i| i.to_string()).collect();
    let u = format!(r#""u":[{}]"#, list.join(","));
    let others: Vec<String> = (0..30).map(|i| format!(r#""a{i:02}":0"#)).collect();
    let first = format!("{{{u},{}}}", others.join(","));
    let last = format!("{{{},{u}}}", others.join(","));
    let mut verdicts = Vec::new();
    for steps in 1..=160 {
        let program = program(schema.clone()).with_limits(64, steps);
        let [value, tape] = on_both(&program, &first);
        let [_, tape_last] = on_both(&program, &last);
        assert_eq!(tape, value, "budget {steps}, `u` first on the tape");
        assert_eq!(tape_last, value, "budget {steps}, `u` last on the tape");
        verdicts.push(value.0);
    }
    // The budgets where the order could matter lie inside this range: small budgets run out,
    // large ones do not.
    assert!(!verdicts[0] && verdicts[159], "{verdicts:?}");
}

/// The same for `propertyNames`, whose names were checked until the first one failed.
#[test]
fn regression_property_names_spend_the_same_steps_in_any_member_order() {
    let schema = json!({"anyOf": [
        {"propertyNames": {"maxLength": 3}},
        {"properties": {"u": {"uniqueItems": true}}}
    ]});
    let list: Vec<String> = (0..10).map(|i| i.to_string()).collect();
    let u = format!(r#""u":[{}]"#, list.join(","));
    let others: Vec<String> = (0..30).map(|i| format!(r#""a{i:02}":0"#)).collect();
    let first = format!(r#"{{"zzzz":0,{u},{}}}"#, others.join(","));
    let last = format!(r#"{{{u},{},"zzzz":0}}"#, others.join(","));
    for steps in 1..=160 {
        let program = program(schema.clone()).with_limits(64, steps);
        let [value, tape] = on_both(&program, &first);
        let [_, tape_last] = on_both(&program, &last);
        assert_eq!(
            tape, value,
            "budget {steps}, the long name first on the tape"
        );
        assert_eq!(
            tape_last, value,
            "budget {steps}, the long name last on the tape"
        );
    }
}

/// Failures, depth aborts and running out of steps in different members, under an `anyOf`
/// whose second branch runs on what the first left: the verdict and the violation are the same
/// for every order of the members, on a tape and on a `Value`, at every depth limit and budget.
#[test]
fn member_order_never_changes_a_verdict_near_the_limits() {
    let schema = json!({
        "$defs": {"s": {
            "type": "object",
            "additionalProperties": {"anyOf": [
                {"type": "integer"},
                {"type": "array", "uniqueItems": true},
                {"$ref": "#/$defs/s"}
            ]}
        }},
        "anyOf": [
            {"$ref": "#/$defs/s"},
            {"required": ["list"], "properties": {"list": {"uniqueItems": true}}}
        ]
    });
    let members = [
        r#""deep":{"x":{"y":{"z":{}}}}"#,
        r#""list":[0,1,2,3,4,5,6,7,8]"#,
        r#""bad":"not an integer, array or object""#,
        r#""fine":7"#,
    ];
    let orders = [[0, 1, 2, 3], [2, 1, 0, 3], [1, 3, 2, 0], [3, 0, 1, 2]];
    for depth in 1..=8 {
        for steps in 1..=120 {
            let program = program(schema.clone()).with_limits(depth, steps);
            let mut seen = Vec::new();
            for order in orders {
                let text = format!("{{{}}}", order.map(|i| members[i]).join(","));
                let [value, tape] = on_both(&program, &text);
                assert_eq!(tape, value, "depth {depth}, budget {steps}: {text}");
                seen.push(tape);
            }
            assert!(
                seen.windows(2).all(|pair| pair[0] == pair[1]),
                "depth {depth}, budget {steps}: {seen:?}"
            );
        }
    }
}

/// Under `not`, a member that fails and another whose check is cut off by the depth limit: the
/// cut-off check could not be finished, so validation aborts as invalid (fail closed) in every
/// member order, instead of the failure turning into a pass through `not` when it happens to
/// be met first.
#[test]
fn a_depth_abort_in_one_member_outranks_a_failure_in_another() {
    let schema = json!({
        "$defs": {"s": {"type": "object", "additionalProperties": {"$ref": "#/$defs/s"}}},
        "not": {"$ref": "#/$defs/s"}
    });
    let deep = r#""b":{"c":{"d":{"e":{"f":{}}}}}"#;
    for text in [
        format!(r#"{{"a":1,{deep}}}"#),
        format!(r#"{{{deep},"a":1}}"#),
    ] {
        // 8 levels reach into `b` (the member loop runs) but not to its end.
        let shallow = program(schema.clone()).with_limits(8, 1000);
        for (valid, violation) in on_both(&shallow, &text) {
            assert!(!valid, "{text}");
            assert_eq!(violation.unwrap().keyword, "limits", "{text}");
        }
        // With room for the nesting, only `a` fails `s`, so `not` holds.
        let roomy = program(schema.clone()).with_limits(64, 1000);
        for (valid, _) in on_both(&roomy, &text) {
            assert!(valid, "{text}");
        }
    }
}

/// Whether `instance` is valid under `program`, asserting that its JSON text on a tape says the
/// same (the charges below are alike for both).
fn valid_on_both(program: &SchemaProgram, instance: &Value) -> bool {
    let text = serde_json::to_vec(instance).unwrap();
    let mut tape = crate::tape::Tape::new();
    let doc = tape.parse(&text, 256).unwrap();
    let answer = is_valid(program, instance);
    assert_eq!(is_valid(program, doc.root()), answer, "{instance}");
    answer
}

/// Found in review: the step budget counted schema nodes, not work. A `pattern` cost one step
/// on a 256 KiB string, so 21 levels of `allOf` doubling through `$ref` ran for minutes; a
/// `uniqueItems` pair cost one step however large its items, so 2,800 arrays of 181 numbers
/// took 25 s. Text costs a step per `BYTES_PER_STEP` bytes, constants by their weight, and
/// `uniqueItems` its worst case up front.
#[test]
fn regression_work_that_grows_with_the_instance_is_charged_by_its_size() {
    let bytes_per_step = usize::try_from(BYTES_PER_STEP).unwrap();
    let text = |steps: usize| Value::String("a".repeat(steps * bytes_per_step));
    for schema in [
        json!({"pattern": "^a*$"}),
        json!({"format": "email"}),
        json!({"maxLength": 1_000_000}),
        json!({"propertyNames": {"pattern": "^a*$"}}),
    ] {
        let program = program(schema.clone()).with_limits(64, 100);
        let (short, long) = if schema.get("propertyNames").is_some() {
            let object = |steps| json!({ text(steps).as_str().unwrap(): 1 });
            (object(50), object(200))
        } else {
            (text(50), text(200))
        };
        let short_answer = valid_on_both(&program, &short);
        assert!(!valid_on_both(&program, &long), "{schema}");
        assert_eq!(
            first_violation(&program, &long).unwrap().keyword,
            "limits",
            "{schema}"
        );
        if schema.get("format").is_none() {
            assert!(short_answer, "{schema}");
        }
    }
    // A constant costs its weight (one per value, one per BYTES_PER_STEP bytes of text), when
    // the instance is of its kind and size; anything else compares at once and costs nothing.
    let big = Value::Array(vec![json!(0); 200]);
    let same_size = Value::Array(vec![json!(1); 200]);
    let program = program(json!({"const": big})).with_limits(64, 100);
    assert!(!valid_on_both(&program, &same_size));
    assert_eq!(
        first_violation(&program, &same_size).unwrap().keyword,
        "limits"
    );
    assert!(!valid_on_both(&program, &json!([1])));
    assert_eq!(
        first_violation(&program, &json!([1])).unwrap().keyword,
        "const"
    );
    // Found in review: every constant of an `enum` was charged, so 5,000 one-letter strings
    // under `enum: ["a", "b", <1,000 numbers>]` ran out of steps.
    let numbers = Value::Array((0..1000).map(|i| json!(i)).collect());
    let program = program_of(json!({"items": {"enum": ["a", "b", numbers]}}), 1 << 22);
    assert!(valid_on_both(
        &program,
        &Value::Array(vec![json!("a"); 5_000])
    ));
    // `uniqueItems` up to 16 items: half the items' weight once per other item, before
    // comparing; over 16, the items' weight and a quarter step per item per halving level.
    let items = |n: usize| {
        Value::Array(
            (0..n)
                .map(|i| {
                    let mut item = vec![json!(0); 20];
                    item.push(json!(i));
                    Value::Array(item)
                })
                .collect(),
        )
    };
    // 16 items of weight 22: 352 × 15 / 2 = 2,640 steps, and one for the schema.
    let schema = json!({"uniqueItems": true});
    assert!(valid_on_both(
        &program_of(schema.clone(), 2_642),
        &items(16)
    ));
    assert!(!valid_on_both(
        &program_of(schema.clone(), 2_640),
        &items(16)
    ));
    // 20 items of weight 22: 440, and 20 × 5 / 4 = 25 for the sort.
    assert!(valid_on_both(&program_of(schema.clone(), 467), &items(20)));
    assert!(!valid_on_both(&program_of(schema.clone(), 465), &items(20)));
    // 100 scalars: 100, and 100 × 7 / 4 = 175.
    let scalars = Value::Array((0..100).map(|i| json!(i)).collect());
    assert!(valid_on_both(&program_of(schema.clone(), 277), &scalars));
    assert!(!valid_on_both(&program_of(schema, 275), &scalars));
}

fn program_of(schema: Value, steps: u64) -> SchemaProgram {
    program(schema).with_limits(64, steps)
}

/// `validate` of `program` on `text` refusing case variants, read as a `Value` and as a tape
/// (in the input's order and in reverse): one answer, returned.
fn validate_both(program: &SchemaProgram, text: &str) -> Result<bool, Refused> {
    let value: Value = serde_json::from_str(text).unwrap();
    let mut tape = crate::tape::Tape::new();
    let doc = tape.parse(text.as_bytes(), 1000).unwrap();
    let budget = || RegexBudget::unlimited();
    let answer = validate(program, &value, &budget(), true);
    assert_eq!(
        validate(program, doc.root(), &budget(), true),
        answer,
        "{text}"
    );
    // Without the rule, a case variant is just another name.
    assert_eq!(
        validate(program, &value, &budget(), false),
        Ok(is_valid(program, &value)),
        "{text}"
    );
    answer
}

#[test]
fn names_the_schema_reads_see_their_case_variants() {
    let program = program(json!({
        "type": "object",
        "required": ["amount"],
        "properties": {
            "amount": {"maximum": 100},
            "payee": {
                "type": "object",
                "properties": {"iban": {"type": "string", "pattern": "^DE"}},
                "additionalProperties": {"type": "string"}
            }
        },
        "dependentRequired": {"card": ["cvv"]}
    }));
    for text in [
        r#"{"AMOUNT":5}"#,
        r#"{"amount":5,"Card":"4111"}"#,
        r#"{"amount":5,"card":"4111","CVV":"1"}"#,
        r#"{"amount":5,"Payee":{"iban":"FR76"}}"#,
        // A member no property names, but a case variant of one, under additionalProperties.
        r#"{"amount":5,"payee":{"IBAN":"FR76"}}"#,
        r#"{"amount":5,"payee":{"iban":"DE89","x":"y","Iban":"FR76"}}"#,
    ] {
        assert_eq!(
            validate_both(&program, text),
            Err(Refused::CaseVariant(CaseVariant)),
            "{text}"
        );
    }
    for (text, valid) in [
        (r#"{"amount":5}"#, true),
        (r#"{"amount":500}"#, false),
        (r#"{"amount":5,"card":"4111","cvv":"1"}"#, true),
        (r#"{"amount":5,"payee":{"iban":"DE89","bic":"X"}}"#, true),
        (r#"{"amount":5,"payee":{"ibans":"FR76"}}"#, true),
        // A failing `required` stops before the names after it, in the schema's order.
        (r#"{"card":"4111"}"#, false),
    ] {
        assert_eq!(validate_both(&program, text), Ok(valid), "{text}");
    }
}

#[test]
fn a_case_variant_among_failing_members_is_found_in_any_member_order() {
    // The quiet evaluator checks every member of an object: a member that fails before or
    // after the one with the variant, in the input's order (a tape) or in name order (a
    // `Value`), gives the same answer.
    let program = program(json!({
        "type": "object",
        "additionalProperties": {"type": "object", "properties": {"n": {"maximum": 1}}}
    }));
    for text in [
        r#"{"a":{"n":5},"b":{"N":0}}"#,
        r#"{"b":{"N":0},"a":{"n":5}}"#,
        r#"{"c":{"n":0},"a":{"n":5},"b":{"x":{"N":9},"N":0}}"#,
    ] {
        assert_eq!(
            validate_both(&program, text),
            Err(Refused::CaseVariant(CaseVariant)),
            "{text}"
        );
    }
    assert_eq!(
        validate_both(&program, r#"{"b":{"n":0},"a":{"n":5}}"#),
        Ok(false)
    );
}
