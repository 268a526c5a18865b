# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one command runner (_runner): argv and locale with a fake module, then real commands through a real
AnsibleModule's run_command and coreutils timeout(1)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import time

import pytest

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import fake_script, process_gone, real_module

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _nvidia_smi
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _runner

C_LOCALE = {'LC_ALL': 'C', 'LANGUAGE': 'C'}


class FakeModule(object):
    """Records what run_command is given and answers with ``reply``."""

    def __init__(self, reply=(0, 'out\n', 'err\n'), tools=None):
        self.reply = reply
        self.tools = {'timeout': '/usr/bin/timeout'} if tools is None else tools
        self.calls = []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return self.tools.get(name)

    def run_command(self, argv, **kwargs):
        self.calls.append((argv, kwargs))
        return self.reply


RUN_KWARGS = {'environ_update': C_LOCALE, 'expand_user_and_vars': False, 'errors': 'replace',
              'handle_exceptions': False}


def test_fake_argv_and_locale():
    module = FakeModule()
    result = _runner.run(module, ['/usr/bin/systemctl', 'show', '--', 'a$HOME', 2])
    assert result == _runner.Result(['/usr/bin/systemctl', 'show', '--', 'a$HOME', '2'], 0, 'out\n', 'err\n', False)
    assert module.calls == [(['/usr/bin/systemctl', 'show', '--', 'a$HOME', '2'], RUN_KWARGS)]


def test_fake_env_cannot_change_the_locale():
    module = FakeModule()
    _runner.run(module, ['/bin/true'], env={'EXTRA': 'x', 'LC_ALL': 'de_DE.UTF-8', 'LANGUAGE': 'de'})
    assert module.calls[0][1]['environ_update'] == {'EXTRA': 'x', 'LC_ALL': 'C', 'LANGUAGE': 'C'}


def test_fake_timeout_wraps_the_command():
    module = FakeModule()
    result = _runner.run(module, ['/usr/bin/nvidia-smi', '-q', '-x'], timeout=7)
    assert module.calls == [(['/usr/bin/timeout', '--kill-after=5', '--signal=TERM', '7', '/usr/bin/nvidia-smi', '-q',
                              '-x'], RUN_KWARGS)]
    assert result.argv == ['/usr/bin/nvidia-smi', '-q', '-x']
    assert result.timed_out is False


@pytest.mark.parametrize('rc, elapsed, timed_out', [
    (124, 7.2, True),     # TERM sufficed
    (-9, 12.1, True),     # KILL after --kill-after: timeout(1) killed its group, itself included
    (137, 12.1, True),    # the same seen through a shell
    (124, 0.5, False),    # the command itself exited 124 before the timeout
    (-9, 0.5, False),     # killed by someone else (the OOM killer) before the timeout
    (15, 7.5, False),     # nvidia-smi: a GPU fell off the bus
])
def test_fake_timed_out_needs_the_rc_and_the_time(monkeypatch, rc, elapsed, timed_out):
    clock = iter([100.0, 100.0 + elapsed])
    monkeypatch.setattr(_runner, 'monotonic', lambda: next(clock))
    result = _runner.run(FakeModule(reply=(rc, 'partial', '')), ['/usr/bin/nvidia-smi', '-q', '-x'], timeout=7)
    assert (result.rc, result.stdout, result.timed_out) == (rc, 'partial', timed_out)


def test_fake_no_timeout_binary():
    with pytest.raises(_runner.CommandNotFound) as err:
        _runner.run(FakeModule(tools={}), ['/usr/bin/nvidia-smi', '-q', '-x'], timeout=7)
    assert str(err.value) == ('cannot run /usr/bin/nvidia-smi -q -x with a timeout: timeout (coreutils) was not found '
                              'in PATH')


@pytest.mark.parametrize('argv', ['nvidia-smi -q -x', b'rpm -qa', [], None, ('rpm', None), ['rpm', True],
                                  ['rpm', {'a': 1}]])
def test_argv_that_is_not_a_list_of_words_is_refused(argv):
    module = FakeModule()
    with pytest.raises(TypeError):
        _runner.run(module, argv)
    assert module.calls == []


def test_string_argv_message():
    with pytest.raises(TypeError) as err:
        _runner.run(FakeModule(), 'rpm -qa')
    assert str(err.value) == "a command is an argv list, never a shell string: got 'rpm -qa'"


@pytest.mark.parametrize('timeout', [0, -1, '5', True])
def test_bad_timeout_is_refused(timeout):
    with pytest.raises(ValueError):
        _runner.run(FakeModule(), ['/bin/true'], timeout=timeout)


# -- real commands ---------------------------------------------------------------------------------------------------

def test_real_locale_and_output(tmp_path):
    script = fake_script(tmp_path, 'tool', 'echo "$LC_ALL/$LANGUAGE/$EXTRA"; echo err >&2; exit 3')
    for timeout in (None, 5):
        result = _runner.run(real_module(), [script], timeout=timeout, env={'EXTRA': 'x', 'LC_ALL': 'fr_FR.UTF-8'})
        assert result == _runner.Result([script], 3, 'C/C/x\n', 'err\n', False)


def test_real_undecodable_bytes_are_replaced(tmp_path):
    script = fake_script(tmp_path, 'tool', "printf 'a\\377b\\n'")
    assert _runner.run(real_module(), [script]).stdout == u'a\ufffdb\n'


def _waitprocess_gone(pid):
    for dummy in range(50):
        if process_gone(pid):
            return True
        time.sleep(0.1)
    return False


def test_real_timeout_kills_the_child_too(tmp_path):
    pidfile = tmp_path / 'child.pid'
    script = fake_script(tmp_path, 'hang', 'echo started\nsleep 60 &\necho $! > "{0}"\nwait'.format(pidfile))
    started = time.time()
    result = _runner.run(real_module(), [script], timeout=1)
    assert time.time() - started < 10
    assert (result.rc, result.stdout, result.timed_out) == (124, 'started\n', True)
    child = int(pidfile.read_text())
    assert _waitprocess_gone(child), 'the child {0} of the timed-out command is still running'.format(child)


def test_real_term_ignored_then_killed(tmp_path):
    pidfile = tmp_path / 'child.pid'
    # An ignored signal stays ignored across fork and exec: the shell and its sleep both ignore TERM.
    script = fake_script(tmp_path, 'stubborn', 'trap "" TERM\nsleep 60 &\necho $! > "{0}"\nwait'.format(pidfile))
    started = time.time()
    result = _runner.run(real_module(), [script], timeout=1, kill_after=1)
    assert time.time() - started < 10
    assert (result.rc, result.timed_out) == (-9, True)
    assert _waitprocess_gone(int(pidfile.read_text()))


def test_real_exit_15_is_not_a_timeout(tmp_path):
    script = fake_script(tmp_path, 'lost', 'echo "<nvidia_smi_log>"; echo "GPU is lost" >&2; exit 15')
    result = _runner.run(real_module(), [script], timeout=5)
    assert (result.rc, result.stdout, result.stderr) == (15, '<nvidia_smi_log>\n', 'GPU is lost\n')
    assert result.timed_out is False


@pytest.mark.parametrize('timeout', [None, 5])
def test_real_missing_binary(tmp_path, timeout):
    missing = str(tmp_path / 'nvidia-smi')
    with pytest.raises(_runner.CommandNotFound) as err:
        _runner.run(real_module(), [missing, '-q', '-x'], timeout=timeout)
    assert str(err.value) == 'cannot run {0}: No such file or directory'.format(missing)
    assert err.value.argv == [missing, '-q', '-x']


@pytest.mark.parametrize('timeout', [None, 5])
def test_real_binary_not_executable(tmp_path, timeout):
    path = tmp_path / 'tool'
    path.write_text('#!/bin/sh\n')
    os.chmod(str(path), 0o644)
    with pytest.raises(_runner.CommandNotFound) as err:
        _runner.run(real_module(), [str(path)], timeout=timeout)
    assert str(err.value) == 'cannot run {0}: Permission denied'.format(path)


def test_run_status_reports_a_missing_binary(tmp_path):
    missing = str(tmp_path / 'dkms')
    assert _runner.run_status(real_module(), [missing, 'status']) == (
        127, '', 'cannot run {0}: No such file or directory'.format(missing))


def test_real_nvidia_smi_exit_15_after_truncated_xml_reports_stderr(tmp_path):
    xml = tmp_path / 'cut.xml'
    xml.write_text('<?xml version="1.0" ?>\n<nvidia_smi_log>\n<driver_version>580.95.05</driver_version>\n<gpu id="0')
    smi = fake_script(tmp_path, 'nvidia-smi', 'cat "{0}"\necho "Unable to determine the device handle for GPU '
                                              '0000:97:00.0: Unknown Error" >&2\nexit 15'.format(xml))
    facts = _nvidia_smi.collect_nvidia_facts(real_module(), timeout=5, nvidia_smi=smi)
    assert (facts['present'], facts['error']) == (
        False, 'Unable to determine the device handle for GPU 0000:97:00.0: Unknown Error')


# ---------------------------------------------------------------------------------- the per-command limit

class LimitedModule(FakeModule):
    """A fake module with the option command_timeout."""

    def __init__(self, limit, **kwargs):
        super(LimitedModule, self).__init__(**kwargs)
        self.params = {'command_timeout': limit}


@pytest.mark.parametrize('params, limit', [
    ({'command_timeout': 20}, 20), ({'command_timeout': None}, None), ({}, None), (None, None),
    ({'command_timeout': 0}, None), ({'command_timeout': True}, None)])
def test_command_limit_is_the_modules_option(params, limit):
    module = FakeModule()
    if params is not None:
        module.params = params
    assert _runner.command_limit(module) == limit


def test_fake_a_command_without_a_limit_of_its_own_gets_the_modules():
    module = LimitedModule(20)
    _runner.run_status(module, ['/usr/bin/systemctl', 'show', 'x'])
    _runner.run(module, ['/usr/bin/nvidia-smi', '-q', '-x'], timeout=7)
    assert [call[0][:4] for call in module.calls] == [['/usr/bin/timeout', '--kill-after=5', '--signal=TERM', '20'],
                                                      ['/usr/bin/timeout', '--kill-after=5', '--signal=TERM', '7']]


def test_real_run_status_names_the_limit_and_remembers_the_command(tmp_path):
    _runner.forget_timeouts()
    script = fake_script(tmp_path, 'systemctl', 'echo partial; sleep 30')
    module = real_module()
    module.params['command_timeout'] = 1
    started = time.time()
    rc, out, err = _runner.run_status(module, [script, 'show', 'x'])
    assert time.time() - started < 10
    assert (rc, out) == (124, 'partial\n')
    assert err == '{0} show x did not answer within 1 seconds (command_timeout) and was killed'.format(script)
    assert _runner.timed_out_commands() == [{'command': script + ' show x', 'seconds': 1,
                                             'option': 'command_timeout'}]
    _runner.forget_timeouts()
    assert _runner.timed_out_commands() == []


def test_real_an_explicit_limit_is_named_by_its_option(tmp_path):
    _runner.forget_timeouts()
    script = fake_script(tmp_path, 'dcgmi', 'sleep 30')
    result = _runner.run(real_module(), [script, 'diag'], timeout=1, option='dcgm_timeout')
    assert result.timed_out is True
    assert _runner.timed_out_commands() == [{'command': script + ' diag', 'seconds': 1, 'option': 'dcgm_timeout'}]
    _runner.forget_timeouts()
