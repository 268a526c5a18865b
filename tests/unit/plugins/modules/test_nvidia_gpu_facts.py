# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import time

import pytest

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES, fake_smi, process_gone, real_module, run_main_rc

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _nvidia_smi
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_xml import parse_nvsmi_xml
from ansible_collections.gpufleet.nodeprep.plugins.modules import nvidia_gpu_facts

XML_DIR = os.path.join(FIXTURES, 'nvidia-smi-xml')
NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.")


def run(args, capsys):
    return run_main_rc(nvidia_gpu_facts.main, args, capsys)


@pytest.mark.parametrize('fixture, count', [
    ('b200-8gpu_k8s-test-infra.xml', 8),
    ('h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml', 8),
    ('gtx-1660ti-1gpu_telegraf.xml', 1),
])
def test_facts_from_fixture(tmp_path, capsys, fixture, count):
    path = os.path.join(XML_DIR, fixture)
    smi = fake_smi(tmp_path, '[ "$1 $2" = "-q -x" ] || exit 99\nexec cat "{0}"'.format(path))
    code, result = run({'nvidia_smi': smi}, capsys)
    assert code == 0
    assert result['changed'] is False
    facts = result['ansible_facts']['nvidia']
    assert facts['present'] is True
    assert facts['error'] is None
    assert len(facts['gpus']) == count
    with open(path) as handle:
        expected = parse_nvsmi_xml(handle.read())
    expected.update(present=True, error=None, partial=False, nvidia_smi=smi)
    assert facts == expected


def test_supported_clocks_left_out(tmp_path, capsys):
    smi = fake_smi(tmp_path, 'exec cat "{0}"'.format(os.path.join(XML_DIR, 'b200-8gpu_k8s-test-infra.xml')))
    code, result = run({'nvidia_smi': smi, 'include_supported_clocks': False}, capsys)
    assert code == 0
    assert [g['supported_clocks'] for g in result['ansible_facts']['nvidia']['gpus']] == [None] * 8


def test_missing_binary_is_not_a_failure(capsys):
    code, result = run({'nvidia_smi': '/nonexistent/nvidia-smi'}, capsys)
    assert code == 0
    assert result['ansible_facts']['nvidia'] == {
        'present': False, 'error': 'nvidia-smi not found at /nonexistent/nvidia-smi', 'partial': False,
        'driver_version': None,
        'cuda_version': None, 'attached_gpus': 0, 'gpu_blocks': 0, 'dtd_version': None, 'timestamp': None,
        'gpus': [], 'nvidia_smi': None}


def test_missing_binary_fails_on_request(capsys):
    code, result = run({'nvidia_smi': '/nonexistent/nvidia-smi', 'fail_on_missing': True}, capsys)
    assert code == 1
    assert result['failed'] is True
    assert result['msg'] == 'NVIDIA driver not usable: nvidia-smi not found at /nonexistent/nvidia-smi'


def test_driver_not_answering(tmp_path, capsys):
    smi = fake_smi(tmp_path, 'echo "{0}"\nexit 9'.format(NO_DRIVER))
    code, result = run({'nvidia_smi': smi}, capsys)
    assert code == 0
    facts = result['ansible_facts']['nvidia']
    assert (facts['present'], facts['error'], facts['gpus']) == (False, NO_DRIVER, [])


def test_driver_not_answering_fail_on_missing(tmp_path, capsys):
    smi = fake_smi(tmp_path, 'echo "{0}"\nexit 9'.format(NO_DRIVER))
    code, result = run({'nvidia_smi': smi, 'fail_on_missing': True}, capsys)
    assert code == 1
    assert result['msg'] == 'NVIDIA driver not usable: ' + NO_DRIVER


def test_silent_failure_is_described(tmp_path, capsys):
    smi = fake_smi(tmp_path, 'exit 6')
    code, result = run({'nvidia_smi': smi}, capsys)
    assert code == 0
    assert result['ansible_facts']['nvidia']['error'] == '{0} -q -x exited with rc 6 and printed nothing'.format(smi)


def test_garbage_output_fails(tmp_path, capsys):
    smi = fake_smi(tmp_path, 'echo "<html></html>"')
    code, result = run({'nvidia_smi': smi}, capsys)
    assert code == 1
    assert result['msg'] == ('cannot parse the output of {0} -q -x: expected root element <nvidia_smi_log> in '
                             'nvidia-smi XML, found <html>'.format(smi))
    assert (result['rc'], result['cmd'], result['stdout']) == (0, [smi, '-q', '-x'], '<html></html>\n')


def test_hang_is_killed_with_its_children(tmp_path, capsys):
    pidfile = tmp_path / 'child.pid'
    smi = fake_smi(tmp_path, 'echo partial\nsleep 30 &\necho $! > "{0}"\nwait'.format(pidfile))
    started = time.time()
    code, result = run({'nvidia_smi': smi, 'timeout': 1}, capsys)
    assert time.time() - started < 10
    assert code == 1
    assert result['msg'] == ('nvidia-smi -q -x did not answer within the timeout of 1 seconds and was killed; a GPU '
                             'may have fallen off the bus (check dmesg for Xid 79) or the driver is hung')
    assert result['cmd'] == [smi, '-q', '-x']
    assert result['stdout'] == 'partial\n'
    for dummy in range(50):
        if process_gone(int(pidfile.read_text())):
            break
        time.sleep(0.1)
    assert process_gone(int(pidfile.read_text()))


def test_collector_raises_its_own_timeout_class(tmp_path):
    smi = fake_smi(tmp_path, 'sleep 30')
    with pytest.raises(_nvidia_smi.NvidiaSmiTimeout) as excinfo:
        _nvidia_smi.collect_nvidia_facts(real_module(), timeout=1, nvidia_smi=smi)
    assert isinstance(excinfo.value, _nvidia_smi.NvidiaCollectError)
    assert excinfo.value.cmd == [smi, '-q', '-x']


def test_bad_timeout(capsys):
    code, result = run({'timeout': 0}, capsys)
    assert code == 1
    assert result['msg'] == 'timeout must be at least 1 second, got 0'
