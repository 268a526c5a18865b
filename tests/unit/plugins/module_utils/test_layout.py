# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils laid out as the pipeline, read from the real files (an AST walk of their imports).

* collect/: what runs on the node (reads files, runs commands through collect/_runner.py);
* parsers/: pure parsers of real outputs and file formats, and what a format means;
* rules/: the collection's decisions;
* plans/: the plan's shape (plans/_plan.py) and each role's plan (_plan_<role>.py).

Imports point one way: plans -> rules -> parsers, collect -> parsers; parsers import parsers only, rules never import
collect, nothing below plans imports plans; no import cycle at module level.  Modules and action plugins may import any
layer.  A node-side module ships (AnsiballZ) the module_utils its imports reach: the gather must ship what it reads
with, not the controller's rules.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import ast
import os

import pytest


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
MU = os.path.join(ROOT, 'plugins', 'module_utils')
PREFIX = 'ansible_collections.gpufleet.nodeprep.plugins.module_utils'
FOLDERS = ('collect', 'parsers', 'rules', 'plans')
# What each folder may import (itself included).
ALLOWED = {
    'parsers': ('parsers',),
    'collect': ('collect', 'parsers'),
    'rules': ('rules', 'parsers'),
    'plans': ('plans', 'rules', 'parsers'),
}
MAX_TOP_LEVEL = 3
# The gather's module_utils (lines of every file AnsiballZ ships with gpu_node_facts): at most 4,000.
GATHER_MAX_LINES = 4000
# What the gather ships today: a ratchet that fails on any growth, while the 4,000-line target above is not met
# (issue 27 item 2: the IMEX reader and the health reads landed after the limits resolution moved to the controller;
# the next step is the parsing of the IMEX and mount outputs on the controller).
GATHER_CEILING_LINES = 4761
GATHER = 'gpu_node_facts.py'


def _path_of(dotted):
    """The file of a module_utils module or package (relative to MU), or None."""
    base = os.path.join(MU, *dotted.split('.')) if dotted else MU
    if os.path.isfile(base + '.py'):
        return os.path.relpath(base + '.py', MU)
    if os.path.isfile(os.path.join(base, '__init__.py')):
        return os.path.relpath(os.path.join(base, '__init__.py'), MU)
    return None


def _imports(path, module_level_only=False):
    """module_utils files (relative to MU) that ``path`` imports, with the packages on the way."""
    with open(path) as handle:
        tree = ast.parse(handle.read())
    nodes = tree.body if module_level_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if not isinstance(node, ast.ImportFrom) or not node.module or not node.module.startswith(PREFIX):
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith(PREFIX) for a in node.names), '{0}: use from-imports'.format(path)
            continue
        sub = node.module[len(PREFIX):].lstrip('.')
        parts = sub.split('.') if sub else []
        for depth in range(1, len(parts) + 1):
            target = _path_of('.'.join(parts[:depth]))
            if target:
                found.add(target)
        for alias in node.names:
            target = _path_of('.'.join(parts + [alias.name]))
            if target:
                found.add(target)
        assert _path_of(sub) or not sub, '{0}: {1} is not a module_utils module'.format(path, node.module)
    return found


def _files():
    out = []
    for dirpath, dirnames, filenames in os.walk(MU):
        dirnames[:] = sorted(d for d in dirnames if d != '__pycache__')
        out.extend(os.path.relpath(os.path.join(dirpath, f), MU) for f in sorted(filenames) if f.endswith('.py'))
    return out


def _folder(rel):
    return rel.split(os.sep)[0] if os.sep in rel else ''


def _lines(rel):
    with open(os.path.join(MU, rel)) as handle:
        return len(handle.read().splitlines())


def shipped(module_file):
    """{module_utils file: lines} that AnsiballZ ships with ``module_file`` (the transitive closure of its imports,
    function-level imports included, as its dependency finder walks the whole tree)."""
    todo = sorted(_imports(module_file))
    seen = set()
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        seen.add(rel)
        todo.extend(sorted(_imports(os.path.join(MU, rel)) - seen))
    return dict((rel, _lines(rel)) for rel in seen)


def test_folders_and_top_level():
    entries = sorted(e for e in os.listdir(MU) if e != '__pycache__')
    top = [e for e in entries if os.path.isfile(os.path.join(MU, e))]
    assert len(top) <= MAX_TOP_LEVEL, 'files at the top of module_utils: {0}'.format(top)
    assert sorted(e for e in entries if os.path.isdir(os.path.join(MU, e))) == sorted(FOLDERS)
    for folder in FOLDERS:
        init = os.path.join(MU, folder, '__init__.py')
        assert os.path.isfile(init), init
        assert os.path.getsize(init) == 0, '{0} must stay empty (ansible-test sanity empty-init)'.format(init)


def test_imports_point_one_way():
    wrong = []
    for rel in _files():
        folder = _folder(rel)
        for target in _imports(os.path.join(MU, rel)):
            if _folder(target) not in ALLOWED.get(folder, FOLDERS):
                wrong.append('{0} imports {1}'.format(rel, target))
    assert not wrong, '\n'.join(wrong)


def test_no_cycle_at_module_level():
    graph = dict((rel, sorted(t for t in _imports(os.path.join(MU, rel), True) if not t.endswith('__init__.py')))
                 for rel in _files())
    state = {}
    cycles = []

    def visit(node, stack):
        state[node] = 'open'
        for target in graph.get(node, ()):
            if state.get(target) == 'open':
                cycles.append(' -> '.join(stack[stack.index(target):] + [target]))
            elif target not in state:
                visit(target, stack + [target])
        state[node] = 'done'

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, '\n'.join(cycles)


def test_unique_basenames():
    seen = {}
    for rel in _files():
        base = os.path.basename(rel)
        if base != '__init__.py':
            seen.setdefault(base, []).append(rel)
    assert not [v for v in seen.values() if len(v) > 1], [v for v in seen.values() if len(v) > 1]


def _gather_lines():
    files = shipped(os.path.join(ROOT, 'plugins', 'modules', GATHER))
    assert not [f for f in files if _folder(f) in ('rules', 'plans')], sorted(files)
    return files, sum(files.values())


def test_gather_grows_no_further():
    files, total = _gather_lines()
    assert total <= GATHER_CEILING_LINES, '{0} ships {1} lines of module_utils in {2} files (ceiling {3}): {4}'.format(
        GATHER, total, len(files), GATHER_CEILING_LINES,
        ', '.join('{0} {1}'.format(f, n) for f, n in sorted(files.items())))


@pytest.mark.xfail(strict=True, reason='the gather ships more than 4,000 lines (GATHER_CEILING_LINES): issue 27 item 2 open')
def test_gather_ships_what_it_reads_with():
    files, total = _gather_lines()
    assert total <= GATHER_MAX_LINES, '{0} ships {1} lines of module_utils in {2} files (at most {3}): {4}'.format(
        GATHER, total, len(files), GATHER_MAX_LINES, ', '.join('{0} {1}'.format(f, n) for f, n in sorted(files.items())))


def test_shipped_closure_is_the_measure():
    """The walk counts what the issue counted before the layout (17 files, 6,509 lines for the gather), so the figure
    above is comparable: here it sees through packages and function-level imports alike."""
    files = shipped(os.path.join(ROOT, 'plugins', 'modules', GATHER))
    assert 'collect/_runner.py' in files and 'collect/__init__.py' in files
    assert 'parsers/_nvidia_smi_xml.py' in files
