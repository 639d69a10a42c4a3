#!/usr/bin/env python3
"""Lists a crate's public API from its rustdoc JSON, one item per line, sorted.

Usage: public_api.py CRATE.json > listing.txt

Each line names an item reachable from the crate root through public
modules and re-exports: modules, structs (and their public fields), enums
(and their variants), traits (and their methods), functions and methods
(with parameter names), constants, statics, type aliases, macros, and the
trait impls of public types (derived or written, not blanket or auto
impls). Removing or renaming any of them changes the listing.
"""
import json
import sys


def main(path):
    doc = json.load(open(path))
    index = doc["index"]
    out = set()

    def item(i):
        return index.get(str(i))

    def type_name(t):
        if not isinstance(t, dict):
            return "?"
        if "resolved_path" in t:
            return t["resolved_path"]["path"]
        if "primitive" in t:
            return t["primitive"]
        if "generic" in t:
            return t["generic"]
        if "borrowed_ref" in t:
            inner = t["borrowed_ref"]
            return "&" + ("mut " if inner.get("is_mutable") else "") + type_name(inner["type"])
        if "slice" in t:
            return "[" + type_name(t["slice"]) + "]"
        if "tuple" in t:
            return "(" + ", ".join(type_name(x) for x in t["tuple"]) + ")"
        return next(iter(t.keys()))

    def fn_line(kind, path, it):
        sig = it["inner"]["function"]["sig"]
        params = ", ".join(name for name, _ in sig["inputs"])
        ret = sig.get("output")
        arrow = f" -> {type_name(ret)}" if ret else ""
        return f"{kind} {path}({params}){arrow}"

    def impls(path, impl_ids):
        for iid in impl_ids:
            imp = item(iid)
            if not imp:
                continue
            body = imp["inner"]["impl"]
            if body.get("is_synthetic") or body.get("blanket_impl"):
                continue
            trait = body.get("trait")
            if trait:
                out.add(f"impl {trait['path']} for {path}")
                continue
            for mid in body["items"]:
                m = item(mid)
                if not m or m.get("visibility") != "public":
                    continue
                kind = next(iter(m["inner"].keys()))
                if kind == "function":
                    out.add(fn_line("fn", f"{path}::{m['name']}", m))
                elif kind in ("assoc_const", "constant"):
                    out.add(f"const {path}::{m['name']}")
                else:
                    out.add(f"{kind} {path}::{m['name']}")

    seen = set()

    def walk(i, prefix, name=None):
        it = item(i)
        if it is None:
            return
        key = (i, prefix)
        if key in seen:
            return
        seen.add(key)
        inner = it["inner"]
        kind = next(iter(inner.keys()))
        nm = name or it.get("name")
        path = f"{prefix}::{nm}" if prefix else nm
        if kind == "module":
            out.add(f"mod {path}")
            for c in inner["module"]["items"]:
                ci = item(c)
                if ci and (ci.get("visibility") == "public" or next(iter(ci["inner"].keys())) == "use"):
                    if ci.get("visibility") != "public":
                        continue
                    walk(c, path)
        elif kind == "use":
            u = inner["use"]
            if u.get("id") is None:
                return
            target = item(u["id"])
            if target is None:
                out.add(f"use {path} = {u['source']}")
                return
            if u.get("is_glob"):
                tkind = next(iter(target["inner"].keys()))
                if tkind == "module":
                    for c in target["inner"]["module"]["items"]:
                        ci = item(c)
                        if ci and ci.get("visibility") == "public":
                            walk(c, prefix)
                return
            walk(u["id"], prefix, u["name"])
        elif kind == "struct":
            out.add(f"struct {path}")
            k = inner["struct"]["kind"]
            if isinstance(k, dict) and "plain" in k:
                for f in k["plain"]["fields"]:
                    fi = item(f)
                    if fi and fi.get("visibility") == "public":
                        out.add(f"field {path}::{fi['name']}: {type_name(fi['inner']['struct_field'])}")
            elif isinstance(k, dict) and "tuple" in k:
                out.add(f"tuple-struct {path} fields={len(k['tuple'])}")
            impls(path, inner["struct"]["impls"])
        elif kind == "enum":
            out.add(f"enum {path}")
            for v in inner["enum"]["variants"]:
                vi = item(v)
                if vi:
                    out.add(f"variant {path}::{vi['name']}")
                    vk = vi["inner"]["variant"]["kind"]
                    if isinstance(vk, dict) and "struct" in vk:
                        for f in vk["struct"]["fields"]:
                            fi = item(f)
                            if fi:
                                out.add(f"field {path}::{vi['name']}::{fi['name']}")
            impls(path, inner["enum"]["impls"])
        elif kind == "trait":
            out.add(f"trait {path}")
            for m in inner["trait"]["items"]:
                mi = item(m)
                if mi:
                    mk = next(iter(mi["inner"].keys()))
                    if mk == "function":
                        out.add(fn_line("trait-fn", f"{path}::{mi['name']}", mi))
                    else:
                        out.add(f"{mk} {path}::{mi['name']}")
        elif kind == "function":
            out.add(fn_line("fn", path, it))
        elif kind in ("constant", "static", "type_alias", "macro", "union", "trait_alias", "proc_macro"):
            out.add(f"{kind} {path}")
        else:
            out.add(f"{kind} {path}")

    walk(doc["root"], "")
    for line in sorted(out):
        print(line)


if __name__ == "__main__":
    main(sys.argv[1])
