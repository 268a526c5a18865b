# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/action/readiness_report.py: the files it writes from hostvars."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import xml.etree.ElementTree as ET

from unittest.mock import MagicMock

import pytest

from ansible.errors import AnsibleActionFail
from ansible.playbook.play_context import PlayContext

from ansible_collections.gpufleet.nodeprep.plugins.action import readiness_report

from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.rules import test_readiness_facts as F  # noqa: E402


def make_action(args):
    task = MagicMock()
    task.args = args
    task.async_val = 0
    task.check_mode = False
    task.diff = False
    action = readiness_report.ActionModule(task, MagicMock(), PlayContext(), loader=None, templar=None,
                                           shared_loader_obj=None)
    return action


def task_vars():
    converged = {'checks': F.evaluate(*F.converged()), 'values': F.checked_values(*F.converged())}
    fresh = {'checks': F.evaluate(*F.fresh())}
    return {
        'ansible_play_hosts_all': ['gpu-a01', 'gpu-a02', 'gpu-a03'],
        'hostvars': {
            'gpu-a01': {'nodeprep_readiness': converged},
            'gpu-a02': {'nodeprep_readiness': fresh},
            'gpu-a03': {},
        },
    }


FILES = ['exit-status', 'junit.xml', 'readiness.prom', 'report.html', 'report.json', 'report.txt']


def test_writes_the_report_files(tmp_path):
    dest = tmp_path / 'out' / 'readiness-report'
    result = make_action({'dest': str(dest)}).run(task_vars=task_vars())
    assert result['changed'] is False
    assert result['dest'] == str(dest)
    assert result['files'] == [str(dest / 'report.json'), str(dest / 'junit.xml'), str(dest / 'report.html'),
                               str(dest / 'report.txt'), str(dest / 'readiness.prom'), str(dest / 'exit-status')]
    assert sorted(os.listdir(str(dest))) == FILES
    assert result['summary'] == {'hosts': 3, 'ready': 1, 'not_ready': 1, 'unreachable': 1,
                                 'pass': 30, 'warn': 0, 'fail': 29, 'skip': 3}
    assert result['ready'] is False
    assert result['not_ready_hosts'] == ['gpu-a02']
    assert result['unreachable_hosts'] == ['gpu-a03']
    data = json.loads((dest / 'report.json').read_text())
    assert [data['hosts'][h]['status'] for h in data['host_order']] == ['ready', 'not_ready', 'unreachable']
    suites = [s.get('name') for s in ET.parse(str(dest / 'junit.xml')).getroot().findall('testsuite')]
    assert suites == ['gpu-a01', 'gpu-a02', 'gpu-a03']
    # the checks of issue 19 in every format
    cases = [c.get('name') for c in ET.parse(str(dest / 'junit.xml')).getroot().iter('testcase')]
    assert 'gpu.fabric' in cases and 'gpu.topology' in cases and 'gpu.dcgm_diag' in cases
    ids = [c['id'] for c in data['hosts']['gpu-a01']['checks']]
    assert ids.index('gpu.fabric') < ids.index('gpu.topology') < ids.index('gpu.dcgm_diag')
    html = (dest / 'report.html').read_text()
    assert 'gpu.fabric' in html and 'gpu.topology' in html and 'gpu.dcgm_diag' in html
    # the health checks of issue 28 in every format
    for check_id in ('gpu.throttle', 'pci.link', 'nvlink.links', 'gpu.remapped_rows', 'gpu.mig', 'gpu.vbios'):
        assert check_id in cases and check_id in html and check_id in ids, check_id
    assert ('<tr id="host-gpu-a03" class="hu"><td class="h"><a href="#host-gpu-a03">gpu-a03</a></td><td class="u">'
            '<a href="#detail-gpu-a03">unreachable</a></td><td class="u m" colspan="31">no result: the host was '
            'unreachable or failed before the check</td></tr>') in html
    # one host could not be checked: exit status 2, in the result, report.json, exit-status and readiness.prom
    assert (result['exit_status'], result['exit_status_meaning']) == (2, 'some hosts could not be checked')
    assert data['exit_status'] == 2
    assert (dest / 'exit-status').read_text() == '2\n'
    assert 'nodeprep_readiness_exit_status 2\n' in (dest / 'readiness.prom').read_text()
    text = (dest / 'report.txt').read_text()
    assert '== gpu-a01: ready\n' in text and 'power limit' in text
    assert result['matrix'].splitlines()[-1] == ('legend: . pass  W warn  F fail  - skip  ? unreachable; hosts 3: '
                                                 '1 ready, 1 not ready, 1 unreachable')
    assert oct(os.stat(str(dest / 'report.json')).st_mode & 0o777) == '0o644'


def test_hosts_option_and_result_var(tmp_path):
    tv = task_vars()
    tv['hostvars']['gpu-a02'] = {'other_result': {'checks': F.evaluate(*F.converged())}}
    result = make_action({'dest': str(tmp_path), 'hosts': ['gpu-a02', 'gpu-a03'],
                          'result_var': 'other_result'}).run(task_vars=tv)
    assert result['summary']['hosts'] == 2
    assert result['summary']['ready'] == 1
    assert result['unreachable_hosts'] == ['gpu-a03']


def test_unknown_host_is_refused_by_name(tmp_path):
    with pytest.raises(AnsibleActionFail) as exc:
        make_action({'dest': str(tmp_path), 'hosts': ['gpu-a02', 'gpu-a09']}).run(task_vars=task_vars())
    assert str(exc.value) == ('hosts: gpu-a09 is not in the inventory; hosts the inventory has: gpu-a01, gpu-a02, '
                              'gpu-a03')


def test_dest_is_a_file(tmp_path):
    path = tmp_path / 'report'
    path.write_text('x')
    with pytest.raises(AnsibleActionFail) as exc:
        make_action({'dest': str(path)}).run(task_vars=task_vars())
    assert str(exc.value) == 'dest {0} exists and is not a directory'.format(path)


def test_rewrite_keeps_no_temporary_files(tmp_path):
    for _round in range(2):
        make_action({'dest': str(tmp_path)}).run(task_vars=task_vars())
    assert sorted(os.listdir(str(tmp_path))) == FILES


@pytest.mark.parametrize('hosts, status, meaning', [
    (['gpu-a01'], 0, 'every host checked and ready'),
    (['gpu-a01', 'gpu-a02'], 1, 'some hosts not ready'),
    (['gpu-a02', 'gpu-a03'], 2, 'some hosts could not be checked'),
])
def test_exit_status(tmp_path, hosts, status, meaning):
    result = make_action({'dest': str(tmp_path), 'hosts': hosts}).run(task_vars=task_vars())
    assert (result['exit_status'], result['exit_status_meaning']) == (status, meaning)
    assert (tmp_path / 'exit-status').read_text() == '{0}\n'.format(status)


def test_prometheus_textfile(tmp_path):
    collector = tmp_path / 'textfile_collector'
    collector.mkdir()
    target = collector / 'nodeprep_readiness.prom'
    for _round in range(2):
        result = make_action({'dest': str(tmp_path / 'report'),
                              'prometheus_textfile': str(target)}).run(task_vars=task_vars())
    assert result['files'][-1] == str(target)
    assert os.listdir(str(collector)) == ['nodeprep_readiness.prom']  # no temporary file left behind
    assert target.read_text() == (tmp_path / 'report' / 'readiness.prom').read_text()
    # per check and status, the number of hosts (gpu-a02 failed gpu.count); no host label (node textfiles have it)
    assert 'nodeprep_readiness_checks{check="gpu.count",status="fail"} 1\n' in target.read_text()
    assert 'host=' not in target.read_text()
    assert oct(os.stat(str(target)).st_mode & 0o777) == '0o644'


@pytest.mark.parametrize('name, message', [
    ('textfile_collector/readiness.txt', 'the textfile collector reads only files whose name ends in .prom; give a '
                                         'name such as nodeprep_readiness.prom'),
    ('missing/readiness.prom', 'the directory {tmp}/missing does not exist; give the directory of node_exporter '
                               '--collector.textfile.directory'),
])
def test_prometheus_textfile_refused(tmp_path, name, message):
    (tmp_path / 'textfile_collector').mkdir()
    with pytest.raises(AnsibleActionFail) as exc:
        make_action({'dest': str(tmp_path / 'report'),
                     'prometheus_textfile': str(tmp_path / name)}).run(task_vars=task_vars())
    assert str(exc.value) == 'prometheus_textfile {0}: {1}'.format(tmp_path / name, message.format(tmp=tmp_path))


def test_no_host_is_not_ready(tmp_path):
    # an empty group or a --limit that matched nothing: before, the action said ready
    result = make_action({'dest': str(tmp_path / 'report'), 'hosts': []}).run(task_vars=task_vars())
    assert result['ready'] is False
    assert (result['exit_status'], result['exit_status_meaning']) == (
        2, 'no host was judged (the play had no host): not ready')
    assert (tmp_path / 'report' / 'exit-status').read_text() == '2\n'
