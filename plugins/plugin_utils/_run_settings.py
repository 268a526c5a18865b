# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE to the gpufleet.nodeprep collection; may change in any release.
"""The variables of a whole run, written once: the limits of every remote step (a hung node costs only itself) and
the identity of a sliced run (AWX job slicing, ansible-runner).  They are collection-wide: site.yml, readiness.yml,
the merge playbook and the roles' gathers read them.  The readiness role lists the ones it reads in its own SETTINGS
(plugins/plugin_utils/_readiness_settings.py), so that `make settings-gen` writes them into its argument specs and
README; docs/performance.md and docs/awx.md describe them.

The SSH connect limit is Ansible's own ``ansible_ssh_timeout`` (the ssh connection's ``timeout`` option, OpenSSH's
ConnectTimeout), not a variable of ours.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

SETTINGS = {
    'nodeprep_command_timeout': {
        'type': 'int', 'default': 60,
        'description': ['Seconds each command a gather or the readiness checks run on a node may take (C(systemctl), '
                        'C(rpm), C(dpkg-query), C(ip), C(ethtool), C(journalctl), ..., and C(nvidia-smi) where no '
                        'limit of its own is set); then coreutils C(timeout) kills it (C(KILL) 5 seconds after '
                        'C(TERM)) and the reader or check that needed it reports it.',
                        'The run summary of C(site.yml) names the nodes where a command was killed.']},
    'nodeprep_gather_timeout': {
        'type': 'int', 'default': 180,
        'description': ["Seconds one remote step of a node may take as a whole: the gather (SSH connection, the "
                        "module's transfer, every command, the answer) of C(site.yml), and the readiness task that "
                        "gathers a node and judges it (plus O(nodeprep_readiness_dcgm_timeout) when DCGM's diagnostic "
                        "runs in that gather). It is Ansible's C(timeout) task keyword; V(0) turns the limit off.",
                        'Keep it above the limits inside the step (C(nodeprep_command_timeout), the nvidia-smi '
                        'timeout) so that the inner limit names the command that hung.']},
    'nodeprep_sliced': {
        'type': 'bool', 'default': False,
        'description': ['This run is one slice of a sliced run (AWX or Automation Platform job slicing, or N '
                        'C(ansible-runner) runs): the run summary and the readiness report of the slice go into '
                        'C(<nodeprep_readiness_report_dir>/slices/<run id>/<slice id>/), and the playbook '
                        'C(gpufleet.nodeprep.merge_slices), run once after the slices, writes the one report and the '
                        'one summary of the run (docs/awx.md).',
                        'A slice of an AWX or Automation Platform sliced job is one whatever this says: AWX names the '
                        'workflow job of a sliced launch after its job template (C(awx_workflow_job_name) equal to '
                        'C(awx_job_template_name)), the rule the rolling playbook refuses slices with.']},
    'nodeprep_run_id': {
        'type': 'str', 'default': '',
        'description': ["The run's id, written into C(run-summary.json) and C(report.json): 1 to 64 letters, digits, "
                        'C(.), C(_) or C(-).',
                        "V('') takes AWX's workflow job id (C(awx_workflow_job_id), which every slice of a sliced "
                        "job shares), else AWX's job id (C(awx_job_id)), else the time the file is written "
                        '(C(YYYYMMDDTHHMMSSZ), UTC).']},
    'nodeprep_slice_id': {
        'type': 'str', 'default': '',
        'description': ["The id of this slice of a sliced run (O(nodeprep_sliced)): 1 to 64 letters, digits, C(.), "
                        "C(_) or C(-). V('') takes AWX's job id (C(awx_job_id)), different for every slice."]},
}

# The names the readiness role reads (its argument specs and README list them as collection-wide variables).
READINESS_READS = ('nodeprep_command_timeout', 'nodeprep_gather_timeout', 'nodeprep_sliced', 'nodeprep_run_id',
                   'nodeprep_slice_id')


def typed(provided, names):
    """``{name: value}`` of ``names`` from ``provided`` (the templated variables), typed with their SETTINGS entries
    by Ansible's argument spec validator, defaults added (``-e nodeprep_sliced=false`` is False, never true).
    Raises ValueError naming the variable and the value when one does not type."""
    spec = dict((name, dict((key, value) for key, value in SETTINGS[name].items()
                            if key in ('type', 'default', 'elements', 'choices'))) for name in names)
    given = dict((name, provided[name]) for name in names if name in provided and provided[name] is not None)
    # The collection's one number rule (a YAML .inf, a number of 400 digits), as every role's settings are typed;
    # imported here because _plans reads the readiness role's SETTINGS, which list some of these.
    from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._plans import number_problem
    problems = []
    values = {}
    for name in names:
        if name not in given:
            values[name] = copy.deepcopy(spec[name].get('default'))
            continue
        found = number_problem(given[name])
        if found:
            problems.append('{0}={1!r}: {2}'.format(name, given[name], found))
            continue
        checked = ArgumentSpecValidator({name: spec[name]}).validate(copy.deepcopy({name: given[name]}))
        if checked.error_messages:
            problems.append('{0}={1!r}: {2}'.format(name, given[name], '; '.join(checked.error_messages)))
        elif number_problem(checked.validated_parameters[name]):
            problems.append('{0}={1!r}: {2}'.format(name, given[name],
                                                    number_problem(checked.validated_parameters[name])))
        else:
            values[name] = checked.validated_parameters[name]
    if problems:
        raise ValueError('; '.join(problems))
    for name in ('nodeprep_command_timeout', 'nodeprep_gather_timeout'):
        if name in values and values[name] < (1 if name == 'nodeprep_command_timeout' else 0):
            raise ValueError('{0}={1!r}: must be {2}'.format(
                name, given.get(name), 'at least 1 second' if name == 'nodeprep_command_timeout'
                else '0 (no limit) or more seconds'))
    return values
