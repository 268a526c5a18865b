# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The test harness itself: one helper module, usable by ansible-test units, on ansible-core 2.16 and later."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re

import pytest

from ansible.module_utils import basic
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nodeprep.tests.unit import nodeprep_harness as harness

TESTS = os.path.join(harness.ROOT, 'tests')
# Imports ansible-test units cannot do (conftest, a module found by the test file's folder) or that exist only from
# ansible-core 2.19 on (ansible.module_utils.testing); use tests/unit/nodeprep_harness.py instead.
FORBIDDEN = re.compile(r'^\s*(from conftest import|import conftest|from _[A-Za-z]\w* import|'
                       r'from ansible\.module_utils\.testing import)', re.M)


def _python_files():
    for folder, _dirs, files in os.walk(TESTS):
        for name in files:
            if name.endswith('.py'):
                yield os.path.join(folder, name)


def test_no_test_imports_conftest_or_core_testing():
    found = []
    for path in _python_files():
        if path == os.path.join(TESTS, 'unit', 'nodeprep_harness.py'):
            continue
        with open(path) as handle:
            for match in FORBIDDEN.finditer(handle.read()):
                found.append('{0}: {1}'.format(os.path.relpath(path, harness.ROOT), match.group(1)))
    assert found == []


def test_no_fixed_venv_or_scratch_paths():
    found = []
    for path in _python_files():
        if path.endswith(os.path.join('unit', 'conftest.py')):
            continue
        with open(path) as handle:
            text = handle.read()
        for word in ("'.venv'", '/.venv/', 'nodeprep-pytest-'):
            if word in text and path != os.path.abspath(__file__):
                found.append('{0}: {1}'.format(os.path.relpath(path, harness.ROOT), word))
    assert found == []


def _args_seen(monkeypatch, capsys, core_helper):
    monkeypatch.setattr(harness, '_core_patch_module_args', core_helper)

    def main():
        module = AnsibleModule(argument_spec=dict(name=dict(type='str', required=True),
                                                  count=dict(type='int', default=1)),
                               supports_check_mode=True)
        module.exit_json(changed=False, seen=module.params, check_mode=module.check_mode)

    return harness.run_main_rc(main, {'name': 'gpu0', 'count': '3', '_ansible_check_mode': True}, capsys)


def test_patch_module_args_fallback_before_2_19(monkeypatch, capsys):
    """ansible-core 2.16-2.18 have no ansible.module_utils.testing: the harness sets basic._ANSIBLE_ARGS itself."""
    saved = getattr(basic, '_ANSIBLE_ARGS', None)
    code, result = _args_seen(monkeypatch, capsys, None)
    assert code == 0
    assert result['seen'] == {'name': 'gpu0', 'count': 3}
    assert result['check_mode'] is True
    assert getattr(basic, '_ANSIBLE_ARGS', None) == saved


def test_patch_module_args_core_helper(monkeypatch, capsys):
    core = pytest.importorskip('ansible.module_utils.testing')
    code, result = _args_seen(monkeypatch, capsys, core.patch_module_args)
    assert (code, result['seen'], result['check_mode']) == (0, {'name': 'gpu0', 'count': 3}, True)


def test_collection_parent_is_only_this_checkout(tmp_path):
    other = tmp_path / 'nodeprep-pytest-other' / 'ansible_collections' / 'gpufleet'
    other.mkdir(parents=True)
    (other / 'nodeprep').symlink_to(tmp_path)  # another checkout (or a stale link)
    dangling = tmp_path / 'nodeprep-pytest-stale' / 'ansible_collections' / 'gpufleet'
    dangling.mkdir(parents=True)
    (dangling / 'nodeprep').symlink_to(tmp_path / 'gone')
    mine = tmp_path / 'mine' / 'ansible_collections' / 'gpufleet'
    mine.mkdir(parents=True)
    (mine / 'nodeprep').symlink_to(harness.ROOT)
    path = [str(tmp_path / 'nodeprep-pytest-other'), str(tmp_path / 'nodeprep-pytest-stale'), str(tmp_path / 'mine')]
    assert harness.collection_parent(path=path) == str(tmp_path / 'mine')
    with pytest.raises(AssertionError, match='no entry of sys.path holds'):
        harness.collection_parent(path=path[:2])


def test_ansible_env_names_only_this_checkout():
    paths = harness.ansible_env()['ANSIBLE_COLLECTIONS_PATH'].split(os.pathsep)
    mine = os.path.join(paths[0], 'ansible_collections', 'gpufleet', 'nodeprep')
    assert os.path.realpath(mine) == harness.ROOT
    assert [p for p in paths[1:] if os.path.isdir(os.path.join(p, 'ansible_collections', 'gpufleet'))] == []


def test_fake_tool_logs_and_reads(tmp_path):
    fixture = tmp_path / 'out.txt'
    fixture.write_text(u'hello\n')
    tool, log = harness.fake_tool(tmp_path, 'ethtool', [('-k', str(fixture))])
    import subprocess
    assert subprocess.check_output([tool, '-k', 'lo']) == b'hello\n'
    assert subprocess.check_output([tool, '-K', 'lo', 'gro', 'off']) == b''
    assert harness.logged(log) == [['-k', 'lo'], ['-K', 'lo', 'gro', 'off']]
