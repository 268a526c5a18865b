#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done on the controller by the action plugin plugins/action/readiness_report.py;
# this file only documents it.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: readiness_report
short_description: Write the fleet readiness report on the controller
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Reads every host's readiness result (what M(gpufleet.nodeprep.readiness_info) returned, kept in the host
    variable named by O(result_var)) from hostvars and writes six files into O(dest) on the controller.
  - C(report.json) - hosts with their checks (id, status, expected, observed, remedy), a summary, the counts and
    failing hosts per check (C(by_check)) and the C(exit_status).
  - C(junit.xml) - a testsuite per host and a testcase per check, for CI systems; V(fail) is a C(<failure>),
    V(skip) a C(<skipped>), V(warn) a passed testcase with C(<system-out>); an unreachable host is one errored
    testcase C(host.reachable); a report over no host is one errored testcase C(hosts.judged). Characters XML 1.0
    does not allow (C0 controls but tab, line feed, carriage return) are written out visibly (C(\\x1b)).
  - C(report.html) - one self-contained page (inline CSS and a small script, nothing fetched, readable with
    scripts off) - the host counts, the checks that failed or warned with how many hosts and which, filters by
    status, check and host name, the matrix of hosts and checks with the hosts that need attention first, then a
    section per such host with its checks that did not pass and the values checked. Each host's row has the id
    C(host-<name>), every byte of the name outside C([A-Za-z0-9._-]) written C(~xx).
  - C(report.txt) - the same matrix, values and failed checks as plain text.
  - C(readiness.prom) - the node_exporter textfile collector's format, bounded by the number of checks, not of hosts
    - C(nodeprep_readiness_checks{check,status}) (the hosts per check and status), C(nodeprep_readiness_hosts{state})
    (V(ready), V(not_ready), V(unreachable)), C(nodeprep_readiness_hosts_not_checked),
    C(nodeprep_readiness_exit_status) and C(nodeprep_readiness_last_run_timestamp_seconds), all gauges. What each
    node failed is in the node's own textfile (M(gpufleet.nodeprep.readiness_textfile)).
  - C(exit-status) - one line, the NHC-style exit status of the run - V(0) every host was checked and is ready,
    V(1) a checked host is not ready, V(2) a host could not be checked (unreachable, or its facts gather failed) or
    the report covers no host; V(2) wins over V(1). A script runs the playbook with
    C(nodeprep_readiness_fail=false) and then C(exit "$(cat readiness-report/exit-status)").
  - Every file is written to a temporary name in its directory and renamed, so no reader sees half a file.
  - A host of O(hosts) without a result, or whose result says it was unreachable, appears everywhere as
    C(unreachable), never as missing.
  - A host of O(hosts) that the inventory does not have is refused, naming it.
  - Runs on the controller only; use it with C(run_once). It never connects to the hosts.
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
options:
  dest:
    description:
      - Directory on the controller to write the report into; created when missing. Relative paths are relative
        to the directory C(ansible-playbook) runs in.
    type: path
    default: ./readiness-report
  hosts:
    description:
      - The hosts to report on, in report order.
      - Defaults to C(ansible_play_hosts_all), so hosts that became unreachable are still listed.
    type: list
    elements: str
  prometheus_textfile:
    description:
      - Also write C(readiness.prom)'s metrics to this file, for the node_exporter textfile collector (the
        directory of its C(--collector.textfile.directory) option, which must exist; the name must end in C(.prom)).
      - Written atomically - a temporary file in the same directory, then a rename.
    type: path
  result_var:
    description:
      - Name of the host variable that holds each host's readiness result.
    type: str
    default: nodeprep_readiness
attributes:
  check_mode:
    support: full
    details:
      - The report is written in check mode too; it changes no managed node.
  diff_mode:
    support: N/A
    details:
      - Nothing on the node changes.
  action:
    support: full
    description: Runs on the controller through an action plugin.
notes:
  - Always returns C(changed=false) - the files it writes live on the controller and carry the time of the run.
seealso:
  - module: gpufleet.nodeprep.readiness_info
  - module: gpufleet.nodeprep.readiness_textfile
"""

EXAMPLES = r"""
- name: Write the readiness report of the whole play
  gpufleet.nodeprep.readiness_report:
    dest: /srv/reports/readiness
  run_once: true
  register: report

- name: Write the report, and the metrics for the controller's node_exporter
  gpufleet.nodeprep.readiness_report:
    dest: /srv/reports/readiness
    prometheus_textfile: /var/lib/node_exporter/textfile_collector/nodeprep_readiness.prom
  run_once: true

- name: Print the matrix
  ansible.builtin.debug:
    msg: "{{ report.matrix.splitlines() }}"
  run_once: true
"""

RETURN = r"""
dest:
  description: Absolute path of the report directory.
  returned: success
  type: str
  sample: /home/ops/fleet/readiness-report
files:
  description: The files written.
  returned: success
  type: list
  elements: str
  sample: [/home/ops/fleet/readiness-report/report.json, /home/ops/fleet/readiness-report/junit.xml,
           /home/ops/fleet/readiness-report/report.html, /home/ops/fleet/readiness-report/report.txt,
           /home/ops/fleet/readiness-report/readiness.prom, /home/ops/fleet/readiness-report/exit-status]
summary:
  description: Host and check counts.
  returned: success
  type: dict
  sample: {hosts: 3, ready: 1, not_ready: 1, unreachable: 1, pass: 24, warn: 2, fail: 1, skip: 3}
  contains:
    hosts:
      description: Hosts in the report.
      type: int
    ready:
      description: Hosts where no check failed.
      type: int
    not_ready:
      description: Reachable hosts where a check failed.
      type: int
    unreachable:
      description: Hosts that could not be checked.
      type: int
    pass:
      description: Checks that passed, over all hosts.
      type: int
    warn:
      description: Checks that warned, over all hosts.
      type: int
    fail:
      description: Checks that failed, over all hosts.
      type: int
    skip:
      description: Checks skipped, over all hosts.
      type: int
matrix:
  description: A compact text matrix, one line per host, to print at the end of the run.
  returned: success
  type: str
ready:
  description: True when at least one host was judged, every host is reachable and no check failed (a report over no
    host is never ready).
  returned: success
  type: bool
not_ready_hosts:
  description: Hosts with at least one failed check.
  returned: success
  type: list
  elements: str
unreachable_hosts:
  description: Hosts without a result.
  returned: success
  type: list
  elements: str
exit_status:
  description:
    - NHC-style - V(0) every host checked and ready, V(1) some checked hosts not ready, V(2) some hosts could not be
      checked (unreachable, or their facts gather failed), which wins over V(1). Also in C(report.json) and the file
      C(exit-status).
  returned: success
  type: int
  sample: 1
exit_status_meaning:
  description: The exit status in words.
  returned: success
  type: str
  sample: some hosts not ready
"""
