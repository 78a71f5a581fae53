#include "tune/runner.h"

#include "tune/worker_runner.h"
#include "util/check.h"

namespace tessera::tune {

namespace {

class InProcessTaskRunner : public TaskRunner {
 public:
  InProcessTaskRunner(const Task& task, const MeasureConfig& config)
      : measurer_(task, config), race_(final_race_config(config)) {}
  std::vector<CandidateResult> measure(
      const std::vector<schedule::KernelSchedule>& schedules) override {
    return measurer_.measure_all(schedules);
  }
  std::vector<CandidateResult> measure_final_race(
      const std::vector<schedule::KernelSchedule>& schedules) override {
    return measurer_.measure_all(schedules, nullptr, &race_);
  }

 private:
  CandidateMeasurer measurer_;
  MeasureConfig race_;
};

class InProcessRunner : public Runner {
 public:
  explicit InProcessRunner(MeasureConfig config) : config_(std::move(config)) {}
  std::string name() const override { return "in-process"; }
  std::unique_ptr<TaskRunner> open(const Task& task) override {
    return std::make_unique<InProcessTaskRunner>(task, config_);
  }

 private:
  MeasureConfig config_;
};

}  // namespace

std::shared_ptr<Runner> in_process_runner(MeasureConfig config) {
  return std::make_shared<InProcessRunner>(std::move(config));
}

std::shared_ptr<Runner> runner_named(const std::string& name) {
  if (name == "workers") return worker_runner();
  if (name == "in-process") return in_process_runner();
  TESSERA_CHECK(false) << "unknown runner '" << name << "' (expected 'workers' or 'in-process')";
  return nullptr;
}

}  // namespace tessera::tune
