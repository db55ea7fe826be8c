import json

from convert import convert, convert_file

SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 1},
        "name": {"type": "string", "minLength": 1, "maxLength": 5},
        "score": {"type": "number", "maximum": 100},
        "tier": {"type": "string", "enum": ["gold", "silver"]},
        "active": {"type": "boolean"},
    },
    "required": ["id", "name"],
    "additionalProperties": False,
}


def test_types_are_coerced_and_records_keep_input_order():
    text = "id,name,score,tier,active\n2, bob ,-0.5,gold,TRUE\n+1,al,1e2,silver,false\n3,cy,.5,gold,False\n"
    result = convert(text, SCHEMA)
    assert result["errors"] == []
    assert result["records"] == [
        {"id": 2, "name": "bob", "score": -0.5, "tier": "gold", "active": True},
        {"id": 1, "name": "al", "score": 100.0, "tier": "silver", "active": False},
        {"id": 3, "name": "cy", "score": 0.5, "tier": "gold", "active": False},
    ]
    assert type(result["records"][1]["score"]) is float and type(result["records"][0]["id"]) is int
    assert type(result["records"][0]["active"]) is bool


def test_empty_cells_are_absent_and_required_fields_enforced():
    text = "id,name,score\n1,ann,\n,bo,5\n2,  ,\n"
    result = convert(text, SCHEMA)
    assert result["records"] == [{"id": 1, "name": "ann"}]
    assert result["errors"] == [{"row": 2, "field": "id", "error": "required"},
                                {"row": 3, "field": "name", "error": "required"}]


def test_type_errors():
    text = "id,name,score,active\n1.0,a,1,true\n12a,b,nan,yes\n3,c,inf,1\n4,d,1.5e,true\n"
    result = convert(text, SCHEMA)
    assert result["records"] == []
    assert result["errors"] == [
        {"row": 1, "field": "id", "error": "type"},
        {"row": 2, "field": "active", "error": "type"},
        {"row": 2, "field": "id", "error": "type"},
        {"row": 2, "field": "score", "error": "type"},
        {"row": 3, "field": "active", "error": "type"},
        {"row": 3, "field": "score", "error": "type"},
        {"row": 4, "field": "score", "error": "type"},
    ]


def test_enum_and_inclusive_bounds():
    text = ("id,name,score,tier\n1,a,100,gold\n0,b,,\n1,c,100.01,\n1,d,,bronze\n"
            "5,e,-1000,silver\n-1,f,,Gold\n")
    result = convert(text, SCHEMA)
    assert result["records"] == [{"id": 1, "name": "a", "score": 100.0, "tier": "gold"},
                                 {"id": 5, "name": "e", "score": -1000.0, "tier": "silver"}]
    assert result["errors"] == [
        {"row": 2, "field": "id", "error": "minimum"},
        {"row": 3, "field": "score", "error": "maximum"},
        {"row": 4, "field": "tier", "error": "enum"},
        {"row": 6, "field": "id", "error": "minimum"},
        {"row": 6, "field": "tier", "error": "enum"},
    ]


def test_string_length_bounds():
    schema = {"properties": {"code": {"type": "string", "minLength": 2, "maxLength": 3},
                             "n": {"type": "integer", "enum": [1, 2]}}}
    result = convert("code,n,note\nab,1,hi\nabc,2,\na,1,\nabcd,2,\nab,3,\n", schema)
    assert result["records"] == [{"code": "ab", "n": 1, "note": "hi"}, {"code": "abc", "n": 2}]
    assert result["errors"] == [{"row": 3, "field": "code", "error": "minLength"},
                                {"row": 4, "field": "code", "error": "maxLength"},
                                {"row": 5, "field": "n", "error": "enum"}]


def test_unknown_columns_and_field_count():
    text = "id,extra,name,other\n1,x,a,y\n\n2,x,b\n3,,c,\n"
    strict = convert(text, SCHEMA)
    assert strict["records"] == [{"id": 1, "name": "a"}, {"id": 3, "name": "c"}]
    assert strict["errors"] == [{"row": 0, "field": "extra", "error": "unknown-column"},
                                {"row": 0, "field": "other", "error": "unknown-column"},
                                {"row": 2, "field": None, "error": "field-count"}]
    lenient = convert(text, {**SCHEMA, "additionalProperties": True})
    assert lenient["records"] == [{"id": 1, "extra": "x", "name": "a", "other": "y"},
                                  {"id": 3, "name": "c"}]
    assert lenient["errors"] == [{"row": 2, "field": None, "error": "field-count"}]
    assert convert("", SCHEMA) == {"records": [], "errors": []}


def test_convert_file_writes_sorted_indented_json(tmp_path):
    (tmp_path / "in.csv").write_text("name,id\nzed,7\n,8\n", encoding="utf-8")
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    out = tmp_path / "out.json"
    result = convert_file(str(tmp_path / "in.csv"), str(tmp_path / "schema.json"), str(out))
    expected = {"errors": [{"error": "required", "field": "name", "row": 2}],
                "records": [{"id": 7, "name": "zed"}]}
    assert result == expected
    assert out.read_text(encoding="utf-8") == json.dumps(expected, indent=2, sort_keys=True) + "\n"
