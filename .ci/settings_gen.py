# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write each role's settings contract from its SETTINGS, the one place a role variable is written.

A role's variables - name, type, default, choices, elements, description - are a SETTINGS dict in Python: the rule
module of every role that plans (plugins/plugin_utils/_plans.py RULES, found through the role list, not through file
paths) and plugins/plugin_utils/_readiness_settings.py for the readiness role. `make settings-gen` writes from them:

* ``roles/<role>/meta/argument_specs.yml``: the ``options`` of the ``main`` entry point. Everything above the line
  ``    options:`` (the role's own short description and description) is hand-written and kept as it is.
* ``roles/<role>/defaults/main.yml``: the whole file, each variable with its description as a comment.
* ``roles/<role>/README.md``: the block between the BEGIN/END settings markers (the variable table, and the
  collection-wide variables the role reads); the prose around it is hand-written.  A guide under docs/ that shows a
  role's variables has the same block, with the same markers (``BEGIN settings of gpufleet.nodeprep.<role>``).

Conventions the files follow:

* A variable whose name does not start with ``nodeprep_<role>_`` is collection-wide (``nodeprep_reboot_ok``,
  ``nodeprep_gpu_node``, ``nodeprep_expected_gpus``): it is in the role's argument specs, listed under the README
  table, and not in ``defaults/main.yml`` (the inventory sets it once for every role).
* ``nodeprep_<role>_<x>`` with default None, where the role's SETTINGS also hold the collection-wide ``nodeprep_<x>``,
  follows it: its default in ``defaults/main.yml`` is ``{{ nodeprep_<x> | default(<its default>) }}``.

Descriptions use Ansible's markup (C(), V(), O(), M(), I(), B(), U(), L()): argument_specs keeps it (ansible-doc and
the docsite render it), the README turns it into Markdown and defaults/main.yml into plain text.

``--check`` (`make settings-check`, part of `make test`) writes nothing and fails, naming each file, when a committed
file is not what this script writes.
"""
import argparse
import os
import re
import sys
import textwrap

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = ("<!-- BEGIN settings of gpufleet.nodeprep.{0}: generated from the role's SETTINGS by `make settings-gen`; "
         'edit them there, not here. -->')
END = '<!-- END settings -->'
_BEGIN_RE = re.compile(r'^<!-- BEGIN settings of gpufleet\.nodeprep\.([a-z0-9_]+): ')
OPTIONS_LINE = '    options:'
OPTIONS_NOTE = "    # Generated from the role's SETTINGS by `make settings-gen` (edit them there, not here):"
WIDTH = 118
# Keys of a SETTINGS entry written to argument_specs.yml, in this order.
SPEC_KEYS = ('description', 'type', 'elements', 'required', 'choices', 'default', 'options', 'version_added')
_MARKUP = re.compile(r'\b([CVOEMIBU])\(([^)]*)\)|\bL\(([^,)]*),\s*([^)]*)\)')


def collection():
    """plugins.plugin_utils._plans of this checkout (the Makefile puts .tmp/collections on PYTHONPATH)."""
    try:
        from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
    except ImportError as exc:
        sys.exit('settings_gen: cannot import the collection ({0}); run it through `make settings-gen`'.format(exc))
    found = os.path.realpath(os.path.dirname(os.path.dirname(os.path.dirname(_plans.__file__))))
    if found != os.path.realpath(ROOT):
        sys.exit('settings_gen: imported the collection from {0}, not from {1}'.format(found, ROOT))
    return _plans


# ---------------------------------------------------------------------------------------------------------- markup

def paragraphs(entry):
    text = entry.get('description') or []
    return [text] if isinstance(text, str) else list(text)


def markdown(text):
    """Ansible markup as Markdown (inline code for C/V/O/E/M; emphasis for I/B; links for U/L)."""
    def one(match):
        if match.group(3) is not None:
            return '[{0}]({1})'.format(match.group(3), match.group(4))
        kind, body = match.group(1), match.group(2)
        if kind == 'I':
            return '*{0}*'.format(body)
        if kind == 'B':
            return '**{0}**'.format(body)
        if kind == 'U':
            return '<{0}>'.format(body)
        return '`{0}`'.format(body)
    return _MARKUP.sub(one, text)


def plain(text):
    """Ansible markup as plain text (for YAML comments)."""
    def one(match):
        if match.group(3) is not None:
            return '{0} ({1})'.format(match.group(3), match.group(4))
        return match.group(2)
    return _MARKUP.sub(one, text)


def flow(value):
    """A value as the README writes it: YAML flow style (null, false, 64G, [nosuid, nodev], {}, "580")."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10 ** 6).strip()
    text = text[:-3].strip() if text.endswith('...') else text
    return '"{0}"'.format(text[1:-1]) if len(text) >= 2 and text[0] == text[-1] == "'" else text


# ----------------------------------------------------------------------------------------------------- conventions

def prefix(role):
    return 'nodeprep_{0}_'.format(role)


def collection_wide(role, name):
    return not name.startswith(prefix(role))


def inherits(role, name, settings):
    """The collection-wide variable ``name`` follows (see the module's docstring), or None."""
    if collection_wide(role, name) or settings[name].get('default') is not None:
        return None
    shared = 'nodeprep_' + name[len(prefix(role)):]
    return shared if shared in settings and collection_wide(role, shared) else None


def type_words(entry):
    return entry['type'] + ('/' + entry['elements'] if entry.get('elements') else '')


# -------------------------------------------------------------------------------------------------- argument_specs

class _Flow(list):
    """A list the dumper writes in flow style ([a, b])."""


class _FlowMap(dict):
    """A mapping the dumper writes in flow style ({})."""


class _Dumper(yaml.SafeDumper):
    """Block sequences indented under their key (yamllint's default)."""

    def increase_indent(self, flow=False, indentless=False):
        return super(_Dumper, self).increase_indent(flow, False)


_Dumper.add_representer(_Flow, lambda dumper, data: dumper.represent_sequence(
    'tag:yaml.org,2002:seq', data, flow_style=True))
_Dumper.add_representer(_FlowMap, lambda dumper, data: dumper.represent_mapping(
    'tag:yaml.org,2002:map', data, flow_style=True))


def _scalars_flow(value):
    if isinstance(value, list):
        return _Flow(value)
    if isinstance(value, dict):
        return _FlowMap(value)
    return value


def spec_entry(entry):
    """One option of argument_specs.yml from a SETTINGS entry (no default key for a default of None)."""
    unknown = sorted(set(entry) - set(SPEC_KEYS))
    if unknown:
        raise ValueError('a SETTINGS entry has keys this generator does not write: {0} (known: {1})'.format(
            ', '.join(unknown), ', '.join(SPEC_KEYS)))
    out = {}
    for key in SPEC_KEYS:
        if key not in entry or entry[key] is None or (key == 'required' and not entry[key]):
            continue
        value = entry[key]
        if key == 'description':
            value = value if isinstance(value, str) else list(value)
        elif key == 'options':
            value = dict((name, spec_entry(sub)) for name, sub in value.items())
        elif key in ('choices', 'default'):
            value = _scalars_flow(list(value) if isinstance(value, tuple) else value)
        out[key] = value
    return out


_SCALAR_LINE = re.compile(r'^( *)(- |[A-Za-z0-9_]+: )(.*)$')


def dump(data, width=WIDTH, indent=0):
    """``data`` as block YAML indented by ``indent`` spaces, long scalars folded at spaces to stay within ``width``
    (PyYAML's own folding may run a word past its width); the text is checked to load back as ``data``."""
    text = yaml.dump(data, Dumper=_Dumper, default_flow_style=False, sort_keys=False, width=float('inf'),
                     allow_unicode=True)
    out = []
    for line in text.splitlines():
        line = ' ' * indent + line if line else line
        match = _SCALAR_LINE.match(line)
        if len(line) <= width or not match or match.group(3)[:1] in ('|', '>', '[', '{', '&', '*', '!'):
            out.append(line)
            continue
        lead = match.group(1) + match.group(2)
        out.extend(textwrap.wrap(match.group(3), width, initial_indent=lead, subsequent_indent=match.group(1) + '  ',
                                 break_long_words=False, break_on_hyphens=False))
    result = '\n'.join(out) + '\n'
    loaded = yaml.safe_load('\n'.join(line[indent:] for line in out))
    if loaded != yaml.safe_load(text):
        raise ValueError('folding changed the YAML of {0}'.format(sorted(data)))
    return result


def argument_specs(text, role, settings):
    """argument_specs.yml with the options of ``main`` written from ``settings`` (the text above them is kept)."""
    lines = text.splitlines()
    if OPTIONS_LINE not in lines:
        raise ValueError('roles/{0}/meta/argument_specs.yml: no line {1!r} (the options of main must come last)'.format(
            role, OPTIONS_LINE))
    head = lines[:lines.index(OPTIONS_LINE)]
    if head and head[-1] == OPTIONS_NOTE:
        head.pop()
    options = dump(dict((name, spec_entry(entry)) for name, entry in settings.items()), indent=6)
    return '\n'.join(head + [OPTIONS_NOTE, OPTIONS_LINE]) + '\n' + options


# ------------------------------------------------------------------------------------------------------- defaults

def comment(text, indent=''):
    lines = textwrap.wrap(text, WIDTH - len(indent) - 2, break_on_hyphens=False, break_long_words=False)
    return ['{0}# {1}'.format(indent, line) for line in lines]


def suboptions_words(entry, render):
    return ' '.join('{0} ({1}{2}): {3}'.format(render('C({0})'.format(name)), type_words(sub),
                                               ', required' if sub.get('required') else '',
                                               render(' '.join(paragraphs(sub))))
                    for name, sub in (entry.get('options') or {}).items())


def defaults(role, settings):
    """The whole defaults/main.yml of ``role``."""
    out = ['---'] + comment(
        "Public variables of gpufleet.nodeprep.{0} and their defaults, generated from the role's SETTINGS by `make "
        'settings-gen` (docs/development.md, "How to add a setting"): edit them there, not here. The contract is '
        'meta/argument_specs.yml (ansible-doc -t role gpufleet.nodeprep.{0}).'.format(role))
    shared = [name for name in settings if collection_wide(role, name)]
    if shared:
        out.append('#')
        out.extend(comment('Collection-wide variables the role reads too, set once in the inventory and not here: '
                           + ', '.join('{0} (default {1})'.format(name, flow(settings[name].get('default')))
                                       for name in shared) + '.'))
    for name, entry in settings.items():
        if collection_wide(role, name):
            continue
        out.append('')
        text = ' '.join(plain(p) for p in paragraphs(entry))
        if entry.get('options'):
            text += ' Keys: ' + suboptions_words(entry, plain)
        if entry.get('choices'):
            text += ' One of: {0}.'.format(', '.join(flow(choice) for choice in entry['choices']))
        out.extend(comment(text))
        shared_name = inherits(role, name, settings)
        if shared_name:
            value = '{{{{ {0} | default({1}) }}}}'.format(shared_name, flow(settings[shared_name].get('default')))
        else:
            value = entry.get('default')
        out.extend(dump({name: value}).splitlines())
    return '\n'.join(out) + '\n'


# --------------------------------------------------------------------------------------------------------- README

def cell(text):
    return text.replace('|', '\\|')


def readme_description(entry):
    """The README's words for one option: its description as Markdown (the same text as argument_specs.yml)."""
    return cell(' '.join(markdown(p) for p in paragraphs(entry)))


def readme_block(role, settings):
    rows = ['| Variable | Type | Default | Choices | Description |', '|---|---|---|---|---|']
    shared = []
    for name, entry in settings.items():
        if collection_wide(role, name):
            shared.append('- `{0}` ({1}, default `{2}`): {3}'.format(
                name, type_words(entry), flow(entry.get('default')), readme_description(entry)))
            continue
        shared_name = inherits(role, name, settings)
        default = '`{0}` or `{1}`'.format(shared_name, flow(settings[shared_name].get('default'))) if shared_name \
            else '`{0}`'.format(flow(entry.get('default')))
        choices = ', '.join('`{0}`'.format(flow(choice)) for choice in entry.get('choices') or [])
        rows.append('| `{0}` | {1} | {2} | {3} | {4} |'.format(
            name, type_words(entry), cell(default), cell(choices), readme_description(entry)))
        for sub_name, sub in (entry.get('options') or {}).items():
            sub_default = 'required' if sub.get('required') else '`{0}`'.format(flow(sub.get('default')))
            sub_choices = ', '.join('`{0}`'.format(flow(choice)) for choice in sub.get('choices') or [])
            rows.append('| `{0}.{1}` | {2} | {3} | {4} | {5} |'.format(
                name, sub_name, type_words(sub), sub_default, cell(sub_choices), readme_description(sub)))
    lines = [BEGIN.format(role)] + rows
    if shared:
        lines += ['', 'Collection-wide variables the role reads too (set them once, in the inventory; they are not in '
                      '`defaults/main.yml`):', ''] + shared
    return lines + [END]


def markdown_page(text, where, contracts, role=None):
    """A Markdown page with each settings block written again (``role``: the one role whose block it must have)."""
    lines = text.splitlines()
    out = []
    roles = []
    while lines:
        line = lines.pop(0)
        match = _BEGIN_RE.match(line)
        if not match:
            out.append(line)
            continue
        if match.group(1) not in contracts or line != BEGIN.format(match.group(1)):
            raise ValueError('{0}: {1!r} names no role with SETTINGS or is not {2!r}'.format(
                where, line, BEGIN.format(match.group(1) if match.group(1) in contracts else '<role>')))
        if END not in lines:
            raise ValueError('{0}: {1!r} has no {2!r} after it'.format(where, line, END))
        del lines[:lines.index(END) + 1]
        roles.append(match.group(1))
        out.extend(readme_block(match.group(1), contracts[match.group(1)]))
    if role is not None and roles != [role]:
        raise ValueError('{0}: needs one settings block, {1!r} ... {2!r}'.format(where, BEGIN.format(role), END))
    return '\n'.join(out) + '\n'


# ----------------------------------------------------------------------------------------------------------- main

def read(path):
    with open(path, encoding='utf-8') as handle:
        return handle.read()


def guides():
    """The Markdown guides under docs/ (a settings block may be in any of them)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, 'docs')):
        dirnames[:] = sorted(d for d in dirnames if d != 'docsite')
        found.extend(os.path.join(dirpath, name) for name in sorted(filenames) if name.endswith('.md'))
    return found


def generated(contracts):
    """``{path: text}`` of every file this script writes."""
    out = {}
    by_role = dict(contracts)
    for role, settings in contracts:
        base = os.path.join(ROOT, 'roles', role)
        specs = os.path.join(base, 'meta', 'argument_specs.yml')
        out[specs] = argument_specs(read(specs), role, settings)
        out[os.path.join(base, 'defaults', 'main.yml')] = defaults(role, settings)
        path = os.path.join(base, 'README.md')
        out[path] = markdown_page(read(path), os.path.relpath(path, ROOT), by_role, role)
    for path in guides():
        text = read(path)
        if any(_BEGIN_RE.match(line) for line in text.splitlines()):
            out[path] = markdown_page(text, os.path.relpath(path, ROOT), by_role)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--check', action='store_true', help='write nothing; fail when a committed file is stale')
    args = parser.parse_args(argv)
    try:
        contracts = collection().contracts()
        files = generated(contracts)
    except ValueError as exc:
        sys.exit('settings_gen: {0}'.format(exc))
    stale = []
    for path, text in sorted(files.items()):
        old = read(path) if os.path.exists(path) else None
        if old == text:
            continue
        stale.append(os.path.relpath(path, ROOT))
        if not args.check:
            with open(path, 'w', encoding='utf-8') as handle:
                handle.write(text)
    if args.check:
        if stale:
            sys.exit('settings-check: not what the roles\' SETTINGS generate (run `make settings-gen`): {0}'.format(
                ', '.join(stale)))
        print('ok  settings-check: {0} files are what the SETTINGS of {1} roles generate'.format(
            len(files), len(contracts)))
    else:
        print('settings-gen: {0} of {1} files written{2}'.format(
            len(stale), len(files), (': ' + ', '.join(stale)) if stale else ''))
    return 0


if __name__ == '__main__':
    sys.exit(main())
