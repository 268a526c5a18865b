# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The release metadata agrees with the code: version_added against galaxy.yml, and a trial changelog release.

The collection has not been released yet, so its first release is galaxy.yml's version: nothing may say it was added
later than that, and the notes of that release list every module, plugin and role as new and hold no breaking change,
removed or deprecated feature (content that was never released cannot break, go away or be deprecated).
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import ast
import glob
import os
import re
import shutil
import subprocess  # nosec B404 - runs antsibull-changelog with a fixed argv list
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(os.path.abspath(sys.executable))
NEVER_IN_A_FIRST_RELEASE = ('breaking_changes', 'removed_features', 'deprecated_features')


def galaxy_version():
    with open(os.path.join(ROOT, 'galaxy.yml')) as handle:
        return yaml.safe_load(handle)['version']


def version_tuple(text):
    match = re.match(r'^(\d+)\.(\d+)\.(\d+)$', str(text))
    assert match, 'not a version X.Y.Z: %r' % (text,)
    return tuple(int(part) for part in match.groups())


def python_doc(path):
    """The DOCUMENTATION of a plugin written in Python, read without importing it."""
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, 'id', None) == 'DOCUMENTATION' for t in node.targets):
            return yaml.safe_load(node.value.value)
    return None


def documented():
    """(relative path, kind, name, documentation) of every module, plugin and role that documents itself."""
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, 'plugins', '*', '*.py'))):
        kind = os.path.basename(os.path.dirname(path))
        if kind in ('module_utils', 'plugin_utils', 'doc_fragments', 'action') or path.endswith('__init__.py'):
            continue
        doc = python_doc(path)
        if doc is not None:
            found.append((os.path.relpath(path, ROOT), kind, os.path.basename(path)[:-3], doc))
    for path in sorted(glob.glob(os.path.join(ROOT, 'plugins', 'filter', '*.yml'))):
        with open(path) as handle:
            found.append((os.path.relpath(path, ROOT), 'filter', os.path.basename(path)[:-4],
                          yaml.safe_load(handle)['DOCUMENTATION']))
    for path in sorted(glob.glob(os.path.join(ROOT, 'roles', '*', 'meta', 'argument_specs.yml'))):
        with open(path) as handle:
            specs = yaml.safe_load(handle)['argument_specs']
        found.append((os.path.relpath(path, ROOT), 'role', path.split(os.sep)[-3], specs['main']))
    return found


def versions_added(node, where=''):
    """Every version_added in a documentation tree, with where it is."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == 'version_added':
                yield where or '(top)', value
            else:
                yield from versions_added(value, '%s.%s' % (where, key) if where else str(key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from versions_added(value, '%s[%d]' % (where, index))


DOCUMENTED = documented()


def test_every_kind_is_found():
    kinds = [entry[1] for entry in DOCUMENTED]
    assert {'modules', 'lookup', 'filter', 'role'} <= set(kinds), kinds
    assert kinds.count('modules') >= 10


@pytest.mark.parametrize('path,kind,name,doc', DOCUMENTED, ids=[entry[0] for entry in DOCUMENTED])
def test_version_added_is_not_after_galaxy_version(path, kind, name, doc):
    release = version_tuple(galaxy_version())
    assert 'version_added' in doc, '%s: no version_added, so no release notes list %s as new' % (path, name)
    for where, value in versions_added(doc):
        assert version_tuple(value) <= release, (
            '%s: %s says version_added %s, after galaxy.yml version %s' % (path, where, value, galaxy_version()))


def test_version_added_is_checked_against_the_right_numbers():
    assert version_tuple('0.1.0') < version_tuple('0.2.0') < version_tuple('0.10.0') < version_tuple('1.0.0')
    with pytest.raises(AssertionError):
        version_tuple('0.2')


def _copy(dest):
    """What antsibull-changelog reads of the checkout, laid out as ansible_collections/gpufleet/nodeprep."""
    target = os.path.join(dest, 'ansible_collections', 'gpufleet', 'nodeprep')
    os.makedirs(target)
    shutil.copy(os.path.join(ROOT, 'galaxy.yml'), target)
    for folder in ('meta', 'plugins', 'roles', 'playbooks', 'changelogs'):
        shutil.copytree(os.path.join(ROOT, folder), os.path.join(target, folder),
                        ignore=shutil.ignore_patterns('__pycache__'))
    return target


@pytest.fixture(scope='module')
def trial_release(tmp_path_factory):
    """changelogs/changelog.yaml after `antsibull-changelog release` of galaxy.yml's version, in a scratch copy."""
    copy = _copy(str(tmp_path_factory.mktemp('changelog')))
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ.get('PATH', ''), ANSIBLE_NOCOLOR='1')
    for name in ('ANSIBLE_COLLECTIONS_PATH', 'ANSIBLE_COLLECTIONS_SCAN_SYS_PATH'):
        env.pop(name, None)
    proc = subprocess.run([os.path.join(BIN, 'antsibull-changelog'), 'release', '--version', galaxy_version(),
                           '--date', '2026-12-01'], cwd=copy, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stdout
    with open(os.path.join(copy, 'changelogs', 'changelog.yaml')) as handle:
        changelog = yaml.safe_load(handle)
    with open(os.path.join(copy, 'CHANGELOG.rst')) as handle:
        rst = handle.read()
    return changelog['releases'][galaxy_version()], rst


def test_first_release_has_nothing_that_breaks_or_goes_away(trial_release):
    release, rst = trial_release
    sections = set(release.get('changes', {}))
    assert 'release_summary' in sections
    assert not sections & set(NEVER_IN_A_FIRST_RELEASE), (
        'a first release cannot break, remove or deprecate what was never released: move these fragments\' entries '
        'to trivial (or to minor_changes): %s' % sorted(sections & set(NEVER_IN_A_FIRST_RELEASE)))
    assert 'Breaking Changes' not in rst and 'Removed Features' not in rst


def test_first_release_lists_every_module_plugin_and_role_as_new(trial_release):
    release, rst = trial_release
    listed = set(('modules', m['name']) for m in release.get('modules', []))
    for kind, plugins in release.get('plugins', {}).items():
        listed |= set((kind, p['name']) for p in plugins)
    listed |= set(('role', r['name']) for r in release.get('objects', {}).get('role', []))
    wanted = set((entry[1], entry[2]) for entry in DOCUMENTED)
    assert wanted - listed == set(), 'not listed as new in the first release: %s' % sorted(wanted - listed)
    assert 'gpufleet.nodeprep.readiness_info' in rst
