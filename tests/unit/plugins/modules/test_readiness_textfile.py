# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/modules/readiness_textfile.py and module_utils/rules/_readiness_textfile.py: the node's own Prometheus
textfile, read back with the strict exposition-format reader of tests/unit/prometheus_format.py (prometheus_client's
parser reads the same files in tests/unit/plugins/plugin_utils/test__readiness_report_fleet.py; it is not installed
for the Python 3.6 run of these tests); at most 25 series; written through a temporary name and a rename; check mode
and diff; a change only when the content changes."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import stat

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.modules import readiness_textfile
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness_textfile as T
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import run_main, run_main_rc
from ansible_collections.gpufleet.nodeprep.tests.unit.prometheus_format import parse_exposition


def checks(**statuses):
    """Every readiness check id passing, but those named (dots written as underscores)."""
    out = []
    for check_id in _readiness.CHECK_IDS:
        out.append({'id': check_id, 'status': statuses.get(check_id.replace('.', '_'), 'pass'),
                    'expected': 'x', 'observed': 'y', 'remedy': 'z'})
    return out


def families(text):
    ours = parse_exposition(text)
    assert all(family['type'] == 'gauge' and family['help'] for family in ours.values())
    return ours


# ---------------------------------------------------------------------------------------------------------------------
# the rendering

def test_a_ready_node():
    text = T.render_node(checks(gpu_dcgm_diag='skip'))
    got = families(text)
    assert got['nodeprep_readiness_node_ready']['samples'] == [({}, 1.0)]
    assert dict((lab['status'], v) for lab, v in got['nodeprep_readiness_node_checks']['samples']) == {
        'pass': float(len(_readiness.CHECK_IDS) - 1), 'warn': 0.0, 'fail': 0.0, 'skip': 1.0}
    assert 'nodeprep_readiness_node_check' not in got  # nothing failed or warned: no series, no HELP/TYPE
    assert got['nodeprep_readiness_node_checks_unlisted']['samples'] == [({}, 0.0)]
    assert T.series_count(text) == 6


def test_a_failing_node_names_its_checks_failed_first():
    text = T.render_node(checks(gpu_topology='warn', pci_acs='fail', gpu_count='fail'))
    got = families(text)
    assert got['nodeprep_readiness_node_ready']['samples'] == [({}, 0.0)]
    assert got['nodeprep_readiness_node_check']['samples'] == [
        ({'check': 'gpu.count', 'status': 'fail'}, 1.0), ({'check': 'pci.acs', 'status': 'fail'}, 1.0),
        ({'check': 'gpu.topology', 'status': 'warn'}, 1.0)]


def test_at_most_25_series_however_many_checks_fail():
    many = [{'id': 'check.{0:02d}'.format(i), 'status': 'fail' if i % 2 else 'warn'} for i in range(60)]
    text = T.render_node(many)
    got = families(text)
    assert T.series_count(text) == T.MAX_SERIES == 25
    listed = got['nodeprep_readiness_node_check']['samples']
    assert len(listed) == T.LISTED_MAX == 19
    assert all(lab['status'] == 'fail' for lab, _v in listed)  # the 30 failures come before the warnings
    assert got['nodeprep_readiness_node_checks_unlisted']['samples'] == [({}, 41.0)]
    assert dict((lab['status'], v) for lab, v in got['nodeprep_readiness_node_checks']['samples']) == {
        'pass': 0.0, 'warn': 30.0, 'fail': 30.0, 'skip': 0.0}


def test_no_checks_is_a_failed_gather():
    got = families(T.render_node([]))
    assert got['nodeprep_readiness_node_ready']['samples'] == [({}, 0.0)]
    assert got['nodeprep_readiness_node_check']['samples'] == [({'check': 'facts.gather', 'status': 'fail'}, 1.0)]


def test_odd_check_ids_are_escaped():
    text = T.render_node([{'id': 'a\\b"c\nd', 'status': 'fail'}])
    assert 'check="a\\\\b\\"c\\nd"' in text
    assert families(text)['nodeprep_readiness_node_check']['samples'][0][0]['check'] == 'a\\b"c\nd'


def test_bad_status_is_refused():
    with pytest.raises(T.TextfileError, match=r"check gpu.count: status 'broken' is not one of pass, warn, fail, skip"):
        T.render_node([{'id': 'gpu.count', 'status': 'broken'}])


@pytest.mark.parametrize('path, words', [
    ('relative/nodeprep.prom', 'not an absolute file path'),
    ('', 'not an absolute file path'),
    ('/var/lib/node_exporter/textfile_collector/', 'not an absolute file path'),
    ('/var/lib/node_exporter/textfile_collector/nodeprep.txt', 'reads only names ending in .prom'),
    ('/var/lib/node_exporter/textfile_collector/.prom', 'reads only names ending in .prom'),
])
def test_bad_paths(path, words):
    with pytest.raises(T.TextfileError) as exc:
        T.check_path(path)
    assert words in str(exc.value)
    assert str(exc.value).startswith('nodeprep_readiness_node_textfile_path={0!r}'.format(path))


# ---------------------------------------------------------------------------------------------------------------------
# the module

def test_writes_then_no_change_then_a_change(tmp_path, capsys):
    target = tmp_path / 'nodeprep.prom'
    args = {'path': str(target), 'checks': checks()}
    # check mode predicts the write and writes nothing
    result = run_main(readiness_textfile.main, dict(args, _ansible_check_mode=True, _ansible_diff=True), capsys)
    assert result['changed'] is True and not target.exists()
    assert result['diff']['before'] == '' and result['diff']['after'] == T.render_node(checks())
    result = run_main(readiness_textfile.main, args, capsys)
    assert result['changed'] is True and result['series'] == 6 and result['ready'] is True
    assert target.read_text() == T.render_node(checks())
    assert stat.S_IMODE(os.stat(str(target)).st_mode) == 0o644
    assert os.listdir(str(tmp_path)) == ['nodeprep.prom']  # the temporary file was renamed, none left
    # the same verdict again: no change, the file untouched
    before = os.stat(str(target)).st_mtime_ns
    result = run_main(readiness_textfile.main, args, capsys)
    assert result['changed'] is False
    assert os.stat(str(target)).st_mtime_ns == before
    # a check fails: a change, in check mode first (predicted, not written), then for real
    failing = dict(args, checks=checks(gpu_count='fail'))
    result = run_main(readiness_textfile.main, dict(failing, _ansible_check_mode=True), capsys)
    assert result['changed'] is True and target.read_text() == T.render_node(checks())
    result = run_main(readiness_textfile.main, failing, capsys)
    assert result['changed'] is True and result['ready'] is False
    assert 'nodeprep_readiness_node_check{check="gpu.count",status="fail"} 1\n' in target.read_text()


def test_the_temporary_name_is_not_read_by_the_collector(tmp_path, monkeypatch, capsys):
    names = []
    real_move = readiness_textfile.AnsibleModule.atomic_move

    def spy(self, src, dest, *args, **kwargs):
        names.append((os.path.dirname(src), os.path.basename(src), dest))
        return real_move(self, src, dest, *args, **kwargs)

    monkeypatch.setattr(readiness_textfile.AnsibleModule, 'atomic_move', spy)
    target = tmp_path / 'nodeprep.prom'
    run_main(readiness_textfile.main, {'path': str(target), 'checks': checks()}, capsys)
    (folder, name, dest), = names
    assert folder == str(tmp_path) and dest == str(target)
    assert name.startswith('.nodeprep.prom.') and not name.endswith('.prom')


def test_mode_is_kept(tmp_path, capsys):
    target = tmp_path / 'nodeprep.prom'
    run_main(readiness_textfile.main, {'path': str(target), 'checks': checks()}, capsys)
    os.chmod(str(target), 0o600)
    result = run_main(readiness_textfile.main, {'path': str(target), 'checks': checks(), '_ansible_check_mode': True},
                      capsys)
    assert result['changed'] is True and stat.S_IMODE(os.stat(str(target)).st_mode) == 0o600
    result = run_main(readiness_textfile.main, {'path': str(target), 'checks': checks()}, capsys)
    assert result['changed'] is True and stat.S_IMODE(os.stat(str(target)).st_mode) == 0o644


@pytest.mark.parametrize('name, words', [
    ('missing/nodeprep.prom', 'path {tmp}/missing/nodeprep.prom: the directory {tmp}/missing does not exist'),
    ('nodeprep.txt', "path='{tmp}/nodeprep.txt': node_exporter's textfile collector reads only names ending in "
                     ".prom"),
])
def test_refused(tmp_path, capsys, name, words):
    rc, result = run_main_rc(readiness_textfile.main, {'path': str(tmp_path / name), 'checks': checks()}, capsys)
    assert rc == 1 and result['failed'] is True and result['changed'] is False
    assert result['msg'].startswith(words.format(tmp=tmp_path))
    assert os.listdir(str(tmp_path)) == []
